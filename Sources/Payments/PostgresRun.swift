import Logging
import PostgresNIO

/// Runs `body` on a PostgreSQL client for the payment-side stores. A failure becomes
/// `STORE_UNAVAILABLE` with the SQLSTATE only (statements and values stay out of messages); a
/// unique violation (23505) becomes `uniqueViolation` when one is given.
func runPostgres<T: Sendable>(
    _ client: PostgresClient, _ logger: Logger, _ what: String, uniqueViolation: PaymentStoreError? = nil,
    _ body: (PostgresClient, Logger) async throws -> T
) async throws(PaymentStoreError) -> T {
    do {
        do {
            return try await body(client, logger)
        } catch let wrapped as PostgresTransactionError {
            throw wrapped.closureError ?? wrapped.beginError ?? wrapped.commitError ?? wrapped
        }
    } catch let error as PSQLError {
        let state = error.serverInfo?[.sqlState]
        if state == "23505", let uniqueViolation { throw uniqueViolation }
        throw PaymentStoreError(.unavailable, "PostgreSQL \(what) failed (\(state.map { "SQLSTATE \($0)" } ?? "\(error.code)"))")
    } catch {
        throw PaymentStoreError(.unavailable, "PostgreSQL \(what) failed (\(type(of: error)))")
    }
}
