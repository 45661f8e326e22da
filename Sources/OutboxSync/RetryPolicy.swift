import Foundation

/// When to try again (pure): exponential backoff with jitter, Retry-After, and a give-up point.
///
/// The delay after the n-th failed attempt is `min(base·2^(n−1), cap)`, scaled by a factor drawn
/// uniformly from `[1 − jitter, 1 + jitter]`. A Retry-After from the engine replaces the computed
/// delay (clamped to `cap`): the engine knows better than our guess when it will take the turn.
public struct RetryPolicy: Sendable, Equatable {
    public var baseMillis: Int64 = 1_000
    public var capMillis: Int64 = 300_000
    /// 0.2 means ±20 %.
    public var jitter: Double = 0.2
    /// After this many spent attempts a retryable failure becomes `failedNeedsAttention`.
    public var attemptLimit: Int = 10

    public init(baseMillis: Int64 = 1_000, capMillis: Int64 = 300_000, jitter: Double = 0.2, attemptLimit: Int = 10) {
        self.baseMillis = baseMillis; self.capMillis = capMillis; self.jitter = jitter; self.attemptLimit = attemptLimit
    }

    /// The delay before attempt n+1 without jitter: `min(base·2^(n−1), cap)` (n ≥ 1).
    public func nominalDelay(afterAttempt n: Int) -> Int64 {
        let exponent = max(0, n - 1)
        // 2^40 · 1 s is far past any cap: stop doubling before it can overflow.
        if exponent >= 40 { return capMillis }
        let raw = baseMillis.multipliedReportingOverflow(by: Int64(1) << Int64(exponent))
        return raw.overflow ? capMillis : min(raw.partialValue, capMillis)
    }

    /// The delay with jitter; `unit` is a uniform draw from [0, 1).
    public func delay(afterAttempt n: Int, unit: Double, retryAfterMillis: Int64? = nil) -> Int64 {
        if let ra = retryAfterMillis { return min(max(0, ra), capMillis) }
        let nominal = Double(nominalDelay(afterAttempt: n))
        let factor = 1 + jitter * (2 * min(max(unit, 0), 1) - 1)
        return Int64((nominal * factor).rounded())
    }

    /// The bounds `delay` stays within for attempt n (no Retry-After).
    public func bounds(afterAttempt n: Int) -> ClosedRange<Int64> {
        let nominal = Double(nominalDelay(afterAttempt: n))
        return Int64((nominal * (1 - jitter)).rounded())...Int64((nominal * (1 + jitter)).rounded())
    }
}

/// Parses a Retry-After header: delta-seconds, or an HTTP-date relative to `nowMillis`.
public func parseRetryAfter(_ value: String, nowMillis: Int64) -> Int64? {
    let v = value.trimmingCharacters(in: .whitespaces)
    if let seconds = Int64(v) { return seconds >= 0 ? seconds * 1000 : nil }
    if let seconds = Double(v), seconds >= 0, seconds.isFinite { return Int64(seconds * 1000) }
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = TimeZone(identifier: "GMT")
    f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
    guard let date = f.date(from: v) else { return nil }
    return max(0, Int64(date.timeIntervalSince1970 * 1000) - nowMillis)
}
