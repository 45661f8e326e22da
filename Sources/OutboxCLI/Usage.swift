import OutboxStore

/// Help texts. Each command's `help` is printed by `outbox help CMD` and `outbox CMD --help`.
enum Usage {
    static let overview = """
    outbox — an offline chat outbox: every turn is durable on disk before the prompt returns, and
    is delivered to the engine exactly once in effect.

    usage: outbox [--dir DIR] [--engine URL] [--surface NAME] COMMAND [ARGS]

    Chatting:
      chat            interactive chat; each line is durable before the prompt returns
      send            enqueue one turn, deliver it and print the reply
    Reading the queue:
      status          counts by state, next attempt, seal, engine, paths
      list            turns, optionally of one state
      show            one turn and every record of its history
      log             the transcript, rendered from the log
      conversations   conversations with their origin surface and turn counts
    Acting on it:
      retry           put failed turns back in the queue with a fresh attempt budget
      cancel          cancel a turn that was never sent
      drain           deliver what is queued (once, or --watch)
    Keeping it healthy:
      verify          check every record and attachment (exit 3 when sealed)
      gc              delete unreferenced attachments and compact the log
      reset           start a fresh log after damage; the damaged one is kept
      salvage         re-import unsent turns from a damaged log
    Other:
      demo            a scripted tour on a temporary outbox and engine
      bench           measure enqueue, group commit, open and drain against the disk's floor
      help            help for a command: outbox help send
      completion      shell completion: outbox completion bash|zsh

    Settings (flags win over the environment):
      --dir DIR        or OUTBOX_DIR; default $XDG_DATA_HOME/outbox, else ~/.local/share/outbox
      --engine URL     or OUTBOX_ENGINE_URL; without one, the reference engine runs inside the
                       command (echo replies) with its data in $XDG_DATA_HOME/outbox-engine
      OUTBOX_ENGINE_TOKEN  bearer token for --engine (never written to the log)
      --surface NAME   or OUTBOX_SURFACE; default cli
      NO_COLOR         disables colour; there is no colour or redraw when output is not a terminal

    Exit codes: 0 ok, 1 failure, 2 usage, 3 the outbox is sealed (writes refused).
    """

    static let chat = """
    usage: outbox chat [-c | --cid ID | --new] [--title TITLE]

    Interactive chat. Each line you type is durable in the outbox before the prompt returns; it
    is delivered in the background and the reply prints when it arrives. If the engine is down the
    turn stays queued, the status line says when the next attempt is, and you keep typing.
    Without -c or --cid, chat starts a new conversation.

      -c, --continue   continue the most recent conversation
      --cid ID         continue conversation ID
      --new            start a new conversation (the default)
      --title TITLE    title of the new conversation (default: the first words of the first line)

    In the chat:
      /attach FILE     attach FILE to the next message
      /retry           retry turns that need attention, now
      /status          the queue in one line
      /quit            leave (or Ctrl-D); says what is still queued and how it will be sent
    """

    static let send = """
    usage: outbox send [TEXT | -] [-c | --cid ID | --new] [--title TITLE] [-a FILE]... [--no-wait] [--json]

    Enqueues a turn durably, then delivers it and prints the reply on stdout. TEXT may be several
    words; `-` (or no TEXT with piped input) reads the message from stdin. If the engine cannot
    be reached the turn stays queued (it is safe), the command says so and exits 0. While the
    engine has not answered it says so on stderr; Ctrl-C then exits 130 and the turn stays saved
    for the next drain, send or chat.

    An empty or whitespace-only message (without -a), an empty stdin, or a message over \(Outbox.maxTextBytes)
    bytes exits 2 and writes nothing. With --engine/OUTBOX_ENGINE_URL set, OUTBOX_ENGINE_TOKEN must
    be too (not needed with --no-wait).

      -c, --continue   continue the most recent conversation
      --cid ID         continue conversation ID
      --new            start a new conversation (the default)
      --title TITLE    title of a new conversation (default: the first words of the message)
      -a, --attach FILE  attach a file (repeatable)
      --no-wait        return as soon as the turn is durable (prints its id)
      --json           print {"id", "conversation", "state", ...} and the reply when there is one
    """

    static let status = """
    usage: outbox status [--json]

    Counts of turns by state, the oldest queued turn's age, the next attempt, whether the outbox is
    sealed (with file, line, byte offset and reason), torn tails repaired, whether the engine can be
    reached, and the paths in use.
    """

    static let list = """
    usage: outbox list [--state S] [--json]

    Turns in the order they were enqueued. S is one of: queued, syncing, synced, needs-attention,
    cancelled, retired. On a sealed outbox, list, show, log and conversations show what was
    written before the damage, say so on stderr, and exit 0; their --json has "sealed".
    """

    static let show = """
    usage: outbox show ID [--json]

    One turn (ID or a unique prefix of at least 4 characters): its current state and every record
    of its history, as written in the log.
    """

    static let log = """
    usage: outbox log [--cid ID]

    The transcript rendered from the log: every conversation (or only ID), your turns and replies.
    """

    static let conversations = """
    usage: outbox conversations [--json]

    Conversations with id, title, origin surface, state and turn count.
    """

    static let retry = """
    usage: outbox retry [ID... | --all]

    Puts turns back in the queue with a fresh attempt budget: turns that need attention, or queued
    turns waiting out a backoff. --all retries every such turn. The next drain delivers them.
    """

    static let cancel = """
    usage: outbox cancel ID

    Cancels a turn that was never sent. A turn that may have reached the engine cannot be cancelled.
    Cancelling a turn that is already cancelled says so and exits 0.
    """

    static let drain = """
    usage: outbox drain [--watch] [--retention SECONDS]

    Delivers every queued turn that is due and records replies, then exits. With --watch it keeps
    running and delivers new turns as they are enqueued (stop it with Ctrl-C or SIGTERM). Only one
    drain runs per outbox at a time.

      --retention SECONDS   retire delivered turns whose reply is recorded after this long
                            (default 86400, a day; 0 retires at once and deletes their attachments)
    """

    static let bench = """
    usage: outbox [--dir DIR] bench [--quick] [--json]

    Measures, in one run, on the filesystem the outbox directory is on (a temporary directory
    beside it, removed afterwards; it never touches the outbox itself):
    the floor (write + fdatasync of a record-sized line), enqueue latency against it, group
    commit across threads and processes, opening 1k/10k/100k-record logs (against jq), drain
    throughput to the reference engine on loopback against raw POSTs, and peak memory.
    --quick takes well under 30 seconds; --json prints one object (see docs/PERFORMANCE.md).
    """

    static let verify = """
    usage: outbox verify [--json]

    Checks every record of the log and every live attachment's hash. Exit 0 healthy, 3 sealed,
    1 other problems (missing or damaged attachments, an unrepaired torn tail).
    """

    static let gc = """
    usage: outbox gc

    Deletes attachments no live turn needs and leftover temporary files, then compacts the log to
    its live records.
    """

    static let reset = """
    usage: outbox reset [--yes] [--force]

    Starts a fresh, empty log after the outbox was sealed by damage. Nothing is deleted: the
    damaged log, its seal marker and links to every attachment move to turns.damaged-<time>/, and
    `outbox salvage` re-imports its unsent turns. On a terminal it asks first unless --yes.

      --yes     do not ask
      --force   start over even though the outbox is healthy
    """

    static let salvage = """
    usage: outbox salvage PATH

    Re-imports every turn of the damaged log at PATH that it does not show as delivered, keeping
    request ids and attachments, so the engine's idempotency keeps it from arriving twice.
    """

    static let demo = """
    usage: outbox demo

    A scripted tour on a temporary outbox and engine that finishes in seconds without input: a send
    while the engine is down, the queue lines, the engine coming up, a drain, a drain killed
    mid-flight with no duplicate, a damaged log, the seal and the reset. Touches nothing of yours.
    """

    static let help = """
    usage: outbox help [COMMAND]

    Help for COMMAND, or the list of commands.
    """

    static let completion = """
    usage: outbox completion bash|zsh

    Prints a completion script. For example:
      outbox completion bash > ~/.local/share/bash-completion/completions/outbox
      outbox completion zsh > "${fpath[1]}/_outbox"
    """
}
