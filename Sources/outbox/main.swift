// outbox: parse nothing here; the CLI library does it all.
import Foundation
import OutboxCLI

exit(CLI.run(CommandLine.arguments))
