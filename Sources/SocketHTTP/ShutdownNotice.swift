import Logging
import ServiceLifecycle

/// Logs one notice line when the server begins its graceful shutdown (SIGTERM or SIGINT: it
/// stops accepting, lets requests in flight finish), so an operator sees why it stopped, and
/// tells systemd `STOPPING=1` (`SystemdNotify`).
public struct ShutdownNotice: Service {
    let name: String
    let logger: Logger

    public init(_ name: String, logger: Logger) {
        self.name = name
        self.logger = logger
    }

    public func run() async throws {
        do {
            try await gracefulShutdown()
            SystemdNotify.stopping(status: "shutting down: finishing requests in flight")
            logger.notice("\(name) shutting down: SIGTERM or SIGINT received, finishing requests in flight")
        } catch {}
    }
}
