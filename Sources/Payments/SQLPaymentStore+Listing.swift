import Foundation
import Store
import VaultCrypto

/// Lists of payments and refunds (README "Listing and search"), newest first, keyset-paginated
/// (`Database.page`) over the indexes of migration `0006-listing`. Store-wide: a payment's scope
/// keys its idempotency only, so every payment of the store is listed to whoever may list.
extension SQLPaymentStore {
    /// The customer a payment's canonical request names (`customer=cus_…&…`), and the mandate
    /// whose customer it is (`mandate=man_…&…`), as the two arguments of the insert's
    /// `COALESCE(?, (SELECT customer FROM vault_mandates WHERE id = ?))`.
    static func customerSource(of request: String) -> [any SQLBindable] {
        func field(_ name: String) -> String? {
            guard request.hasPrefix(name + "=") else { return nil }
            return String(request.dropFirst(name.count + 1).prefix { $0 != "&" })
        }
        return [field("customer"), field("mandate")]
    }

    public func list(
        _ q: ListQuery, status: PaymentRecord.Status?, customer: String?, metadata: [(key: String, value: String)]
    ) async throws(StoreError) -> ListPage<PaymentRecord> {
        var filters: [(String, [any SQLBindable])] = []
        if let status { filters.append(("status = ?", [status.rawValue])) }
        if let customer { filters.append(("customer = ?", [customer])) }
        filters += Metadata.filters(metadata, owner: .payment)
        return try await db.page("vault_payments", columns: Self.columns, filters: filters, q).map(Self.payment)
    }

    public func listRefunds(
        _ q: ListQuery, status: PaymentOperation.Status?, payment: String?, metadata: [(key: String, value: String)]
    ) async throws(StoreError) -> ListPage<PaymentOperation> {
        var filters: [(String, [any SQLBindable])] = []
        if let status { filters.append(("status = ?", [status.rawValue])) }
        if let payment { filters.append(("payment_id = ?", [payment])) }
        filters += Metadata.filters(metadata, owner: .refund)
        return try await db.page(
            "vault_payment_operations", columns: Self.operationColumns, kind: "kind = 'refund'", filters: filters, q
        ).map(Self.operation)
    }
}
