import Foundation
import Payments
import Sidecar
import Testing

/// A payment as the API shows it: an `unknown` one says why (`reason`), and a payment without a
/// reason has no such key.
@Suite struct PaymentJSONTests {
    static func payment(status: PaymentRecord.Status, reason: String?) -> PaymentRecord {
        PaymentRecord(
            id: "pay_abc", idempotencyKey: "order-1", request: "token=tok_abc&amount=1050&currency=EUR", token: "tok_abc", singleUse: true,
            amount: 1050, currency: "EUR", status: status, reason: reason, createdAt: Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test func anUnknownPaymentCarriesItsReason() throws {
        let text = PaymentService.json(Self.payment(status: .unknown, reason: "processor timed out \"twice\""))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["status"] as? String == "unknown")
        #expect(object["reason"] as? String == "processor timed out \"twice\"")
        let settled = try #require(
            try JSONSerialization.jsonObject(with: Data(PaymentService.json(Self.payment(status: .succeeded, reason: nil)).utf8)) as? [String: Any])
        #expect(settled["reason"] == nil && settled["status"] as? String == "succeeded")
    }
}
