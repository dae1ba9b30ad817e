import Foundation
import Payments
import Sidecar
import SocketHTTP
import Testing
import Tokenizer
import VaultCrypto

/// The answer models (`Answer`, encoded by `AnswerJSON`) write what the hand-built strings of
/// earlier versions wrote, byte for byte: field names, order, `null` where the schema has a
/// nullable field, omission of absent optional fields, the timestamp form, escaping; plus
/// `metadata` (README "Metadata").
@Suite struct AnswerModelTests {
    static let t = Date(timeIntervalSince1970: 1_800_000_000)   // 2027-01-15T08:00:00Z

    static func payment(_ status: PaymentRecord.Status, request: String = "token=tok_abc&amount=1050&currency=EUR", token: String = "tok_abc",
                        code: String? = nil, nextAction: String? = nil, reason: String? = nil, manual: Bool = false, metadata: Metadata = Metadata()) -> PaymentRecord {
        PaymentRecord(
            id: "pay_abc", idempotencyKey: "k", request: request, token: token, singleUse: true, amount: 1050, currency: "EUR", status: status,
            code: code, reference: status == .succeeded ? "sbx_1" : nil, nextAction: nextAction, reason: reason, createdAt: t,
            manualCapture: manual, authorizationExpiresAt: manual ? t.addingTimeInterval(60) : nil, metadata: metadata)
    }

    @Test func paymentsAsEarlierVersionsWroteThem() {
        #expect(PaymentService.json(Self.payment(.succeeded, metadata: Metadata(["order": "A-1", "b": "x\"y"]))) == #"""
            {"id":"pay_abc","status":"succeeded","amount":1050,"currency":"EUR","token":"tok_abc","capture_method":"automatic","amount_captured":1050,"amount_refunded":0,"reference":"sbx_1","metadata":{"b":"x\"y","order":"A-1"},"created_at":"2027-01-15T08:00:00Z","updated_at":"2027-01-15T08:00:00Z"}
            """#)
        let threeDS = Self.payment(.requiresAction, nextAction: #"{"type":"three_ds","transaction_id":"3ds_1"}"#)
        #expect(PaymentService.json(threeDS) == #"""
            {"id":"pay_abc","status":"requires_action","amount":1050,"currency":"EUR","token":"tok_abc","capture_method":"automatic","amount_captured":0,"amount_refunded":0,"next_action":{"type":"three_ds","transaction_id":"3ds_1"},"metadata":{},"created_at":"2027-01-15T08:00:00Z","updated_at":"2027-01-15T08:00:00Z"}
            """#)
        let byCustomer = Self.payment(.declined, request: "customer=cus_x&amount=1050&currency=EUR", token: "ins_y", code: "do_not_honor")
        #expect(PaymentService.json(byCustomer) == #"""
            {"id":"pay_abc","status":"declined","amount":1050,"currency":"EUR","instrument":"ins_y","customer":"cus_x","capture_method":"automatic","amount_captured":0,"amount_refunded":0,"decline_code":"do_not_honor","metadata":{},"created_at":"2027-01-15T08:00:00Z","updated_at":"2027-01-15T08:00:00Z"}
            """#)
        let held = Self.payment(.requiresCapture, manual: true)
        #expect(PaymentService.json(held).contains(#""capture_method":"manual","amount_captured":0,"amount_refunded":0,"authorization_expires_at":"2027-01-15T08:01:00Z","metadata""#))
        #expect(PaymentService.json(Self.payment(.failed, code: "ENVELOPE_TAMPERED")).contains(#""failure_code":"ENVELOPE_TAMPERED""#))
        #expect(PaymentService.json(Self.payment(.canceled, code: "expired", manual: true)).contains(#""cancellation_reason":"expired","metadata""#))
        #expect(PaymentService.json(Self.payment(.unknown, reason: "line\nbreak")).contains(#""reason":"line\nbreak""#))
    }

    @Test func customersRefundsSessionsMandatesAndTheirNulls() throws {
        let c = CustomerRecord(id: "cus_a", reference: nil, createdAt: Self.t)
        #expect(CustomerService.json(c, nil) == #"{"id":"cus_a","reference":null,"default_instrument":null,"metadata":{},"created_at":"2027-01-15T08:00:00Z"}"#)
        #expect(CustomerService.json(c, []).contains(#""default_instrument":null,"instruments":[],"metadata":{}"#))
        let refund = PaymentOperation(
            id: "re_a", paymentID: "pay_a", kind: .refund, scope: "s", idempotencyKey: "k", request: "r", amount: 5, currency: "EUR", status: .failed,
            code: "refund_failed", createdAt: Self.t)
        #expect(PaymentService.refundJSON(refund) == #"""
            {"id":"re_a","object":"refund","payment":"pay_a","status":"failed","amount":5,"currency":"EUR","failure_code":"refund_failed","metadata":{},"created_at":"2027-01-15T08:00:00Z","updated_at":"2027-01-15T08:00:00Z"}
            """#)
        let session = SessionRecord(
            id: "sess_a", amount: 100, currency: "GBP", acceptedBrands: ["visa", "mastercard"], customer: nil, status: .open, paymentID: nil, attempts: 0,
            createdAt: Self.t, expiresAt: Self.t.addingTimeInterval(900))
        #expect(SessionService.json(session, now: Self.t) == #"""
            {"id":"sess_a","status":"open","amount":100,"currency":"GBP","accepted_brands":["visa","mastercard"],"customer":null,"payment":null,"attempts":0,"created_at":"2027-01-15T08:00:00Z","expires_at":"2027-01-15T08:15:00Z"}
            """#)
        #expect(SessionService.json(session, now: Self.t.addingTimeInterval(901)).contains(#""status":"expired""#))
        #expect(CustomerService.erasureJSON(CustomerErasure(customer: "cus_a", instruments: ["ins_1"], mandatesCancelled: [])) ==
            #"{"id":"cus_a","deleted":true,"erased":{"instruments":["ins_1"],"mandates_cancelled":[]}}"#)
    }

    @Test func theEncoderEscapesAndOrders() {
        struct Sample: Encodable { let b: String, a: Int, n: OrNull<Int>, o: String?, list: [Bool], x: Int64, d: Double }
        #expect(AnswerJSON.encode(Sample(b: "q\"\\\u{1}é", a: -3, n: OrNull(nil), o: nil, list: [true, false], x: 7, d: 0.5)) ==
            #"{"b":"q\"\\\u0001é","a":-3,"n":null,"list":[true,false],"x":7,"d":0.5}"#)
    }
}
