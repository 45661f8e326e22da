extension Outbox {
    /// The largest message text, in UTF-8 bytes, a turn may carry (attachments are separate).
    /// Public so a front end can refuse a message before it writes anything.
    public static var maxTextBytes: Int { Validate.maxTextBytes }
}
