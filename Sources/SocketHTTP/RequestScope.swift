/// What a log line written while a request is handled knows of that request.
public enum RequestScope {
    /// The `Request-Id` answered to the request this task is handling (set by
    /// `ConventionsMiddleware` around the handler). The servers' log handler writes it as
    /// `request_id` on every line logged meanwhile, by any logger (a service's own too), so a
    /// caller's `Request-Id` finds every line of its request. Nil outside a request.
    @TaskLocal public static var requestID: String?
}
