import Events
import Foundation
import Payments
import Store
import Testing
import Tokenizer
import VaultCrypto

/// The events outbox on both backends (docs/events.md): each state change of a token, payment,
/// refund, customer, instrument and mandate writes its event in the same transaction (a rolled
/// back change writes none), with the object's state and no card data; delivery picks only the
/// earliest pending event of each object; the lease has one holder at a time.
@Suite struct EventOutboxTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    /// Every event of the store, oldest first, as (type, object id, data).
    static func events(_ db: Database) async throws -> [(type: String, object: String, data: [String: Any])] {
        try await db.query("SELECT type, object_id, data FROM vault_events ORDER BY seq").map { r in
            let data = try JSONSerialization.jsonObject(with: Data(try r.string(2).utf8)) as? [String: Any] ?? [:]
            return (try r.string(0), try r.string(1), data)
        }
    }

    @Test(arguments: Backend.available)
    func everyStateChangeWritesOneEventWithTheObjectsState(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let tokens = SQLTokenStore(database: h.db), payments = SQLPaymentStore(database: h.db), customers = SQLCustomerStore(database: h.db)

        // Tokens: created, deleted, expired (the sweeper's delete).
        let kept = record(try sampleEnvelope(), at: Self.t0), gone = record(try sampleEnvelope("5555555555554444"), at: Self.t0)
        // (The trigger tells expired from deleted by the clock at the delete: this one is past.)
        let old = record(try sampleEnvelope(), at: Date().addingTimeInterval(-2000))
        for r in [kept, gone, old] { try await tokens.insert(r) }
        #expect(try await tokens.delete(gone.token))
        #expect(try await tokens.purgeExpired(now: Date()).tokensDeleted == 1)

        // A payment: processing (no event), then succeeded; a refund: processing, then succeeded.
        var p = PaymentStoreSuiteTests.intent(amount: 5000, at: Self.t0)
        p.singleUse = false
        #expect(try await payments.begin(p) == .created)
        #expect(try await payments.finish(p.id, status: .succeeded, code: nil, reference: "sbx_1", nextAction: nil, now: Self.t0))
        let paid = try #require(try await payments.get(p.id))
        let refund = PaymentOperationStoreTests.op(.refund, paid, amount: 1200)
        #expect(try await payments.beginOperation(refund, now: Self.t0) == .created)
        #expect(try await payments.finishOperation(refund.id, status: .succeeded, code: nil, reference: "sbx_r", now: Self.t0))
        // A refund that never reached the processor is dropped: no event.
        let dropped = PaymentOperationStoreTests.op(.refund, paid, amount: 100)
        #expect(try await payments.beginOperation(dropped, now: Self.t0) == .created)
        try await payments.abandonOperation(dropped.id)

        // A customer: created, updated, an instrument attached, a mandate made and cancelled, erased.
        let c = CustomerRecord(id: RandomID.make(prefix: "cus_"), reference: "crm-1", createdAt: Self.t0)
        _ = try await customers.create(c, claim: nil, uniqueReference: false)
        // Reference and metadata changed together: one event.
        var change = CustomerChange(reference: .some("crm-2"))
        change.metadata = Metadata(["tier": "gold"])
        _ = try await customers.update(c.id, change, uniqueReference: false)
        let card = InstrumentRecord(id: RandomID.make(prefix: "ins_"), customer: c.id, envelope: try sampleEnvelope(), createdAt: Self.t0)
        #expect(try await customers.attach(card, makeDefault: true))
        let m = MandateRecord(
            id: RandomID.make(prefix: "man_"), customer: c.id, instrument: card.id, amount: 999, maxAmount: 999, currency: "EUR",
            interval: .month, maxCycles: 12, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(86_400 * 400))
        _ = try await customers.createMandate(m, claim: nil)
        let beforeErasure = try await Self.events(h.db)
        _ = try await customers.delete(c.id)

        let all = try await Self.events(h.db)
        let expected: [(String, String)] = [
            ("token.created", kept.token), ("token.created", gone.token), ("token.created", old.token), ("token.deleted", gone.token),
            ("token.expired", old.token), ("payment.succeeded", p.id), ("refund.succeeded", refund.id),
            ("customer.created", c.id), ("customer.updated", c.id), ("instrument.created", card.id), ("customer.updated", c.id),
            ("mandate.created", m.id), ("mandate.cancelled", m.id), ("instrument.deleted", card.id), ("customer.deleted", c.id),
        ]
        #expect(all.map(\.type) == expected.map(\.0))
        #expect(all.map(\.object) == expected.map(\.1))

        // The object's state at the change, as the API names its fields; no card data.
        let token = try #require(all.first)
        #expect(token.data["token"] as? String == kept.token && token.data["object"] as? String == "token")
        #expect((token.data["card"] as? [String: Any])?["last4"] as? String == "4242")
        #expect(token.data["single_use"] as? Bool == true && token.data["expires_at"] as? String == "2027-01-15T08:15:00Z")
        let payment = all[5].data
        #expect(payment["status"] as? String == "succeeded" && payment["amount"] as? Int == 5000 && payment["reference"] as? String == "sbx_1")
        #expect(payment["amount_captured"] as? Int == 5000 && payment["capture_method"] as? String == "automatic")
        #expect(all[6].data["payment"] as? String == p.id && all[6].data["amount"] as? Int == 1200)
        #expect(beforeErasure[8].data["reference"] as? String == "crm-2" && (beforeErasure[8].data["metadata"] as? [String: String]) == ["tier": "gold"])
        #expect(beforeErasure[10].data["default_instrument"] as? String == card.id)
        #expect(beforeErasure[9].data["card"] is [String: Any], "an instrument's card metadata, until erasure")
        #expect(all[12].data["status"] as? String == "cancelled" && all[12].data["interval"] as? String == "month")
        // Erasure reached the outbox: the customer's and its instrument's events keep only their id.
        for e in all where e.object == c.id || e.object == card.id {
            #expect(e.data.count == 3 && e.data["id"] as? String == e.object && e.data["erased"] as? Bool == true, "\(e.type): \(e.data)")
        }
        let erasedText = try await h.db.query("SELECT data FROM vault_events WHERE object_id IN (?, ?)", [c.id, card.id]).map { try $0.string(0) }.joined()
        #expect(!erasedText.contains("crm-") && !erasedText.contains("gold") && !erasedText.contains("4242"))
        let text = try await h.db.query("SELECT data FROM vault_events").map { try $0.string(0) }.joined()
        #expect(!text.contains("4242424242424242") && !text.contains("5555555555554444") && !text.contains("\"envelope\""))
        #expect(!text.contains("\"ciphertext\"") && !text.contains("\"fields\""), "no envelope part in an event")

        // Ids: evt_ and 24 hex digits of the event's seq, one per change; read back by id.
        let ids = try await h.db.query("SELECT seq FROM vault_events ORDER BY seq").map { EventRecord.id(Int64(try $0.int(0))) }
        #expect(Set(ids).count == ids.count && ids.allSatisfy { $0.count == 28 && $0.hasPrefix("evt_") && EventRecord.seq($0) != nil })
        let events = EventStore(database: h.db)
        #expect(try await events.get(ids[5])?.type == "payment.succeeded")
        #expect(try await events.get("evt_ffffffffffffffffffffffff") == nil && EventRecord.seq("evt_12") == nil && EventRecord.seq("evt_" + String(repeating: "G", count: 24)) == nil)
    }

    @Test(arguments: Backend.available)
    func aRolledBackChangeWritesNoEvent(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let r = record(try sampleEnvelope(), at: Self.t0)
        do throws(StoreError) {
            try await h.db.transaction { (tx) throws(StoreError) in
                try await tx.query("""
                    INSERT INTO vault_tokens (token, envelope, brand, bin, last4, created_at, expires_at, single_use)
                    VALUES (?, '{}', 'visa', '424242', '4242', 1, 2, TRUE)
                    """, [r.token])
                #expect(try await tx.query("SELECT COUNT(*) FROM vault_events").first?.int(0) == 1, "the trigger wrote it in the transaction")
                throw StoreError(.unavailable, "roll back")
            }
        } catch {}
        #expect(try await h.db.query("SELECT COUNT(*) FROM vault_events").first?.int(0) == 0)
    }

    @Test(arguments: Backend.available)
    func deliveryTakesTheEarliestPendingEventOfEachObjectAndOneLeaseHolder(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let tokens = SQLTokenStore(database: h.db), events = EventStore(database: h.db)
        let a = record(try sampleEnvelope(), at: Self.t0), b = record(try sampleEnvelope(), at: Self.t0)
        try await tokens.insert(a)
        #expect(try await tokens.delete(a.token))
        try await tokens.insert(b)
        let now = Date()
        var due = try await events.due(now: now, limit: 10)
        #expect(due.map(\.type) == ["token.created", "token.created"] && due.map(\.objectID) == [a.token, b.token])
        // a's creation fails: its deletion waits behind it; b's is delivered.
        let retry = now.addingTimeInterval(60)
        try await events.record([(due[0].seq, .failed(status: 503, error: "the endpoint answered 503", retryAt: retry)),
                                 (due[1].seq, .delivered(status: 204))], at: now)
        #expect(try await events.due(now: now, limit: 10).isEmpty, "a's deletion waits for its creation")
        due = try await events.due(now: retry, limit: 10)
        #expect(due.map(\.objectID) == [a.token] && due[0].delivery.attempts == 1 && due[0].delivery.lastStatus == 503)
        try await events.record([(due[0].seq, .delivered(status: 200))], at: retry)
        due = try await events.due(now: retry, limit: 10)
        #expect(due.map(\.type) == ["token.deleted"])
        #expect(try await events.backlog().count == 1)
        let listed = try #require(try await events.list(ListQuery(), type: "token.created", object: b.token).items.first)
        let delivered = try #require(try await events.get(listed.id))
        #expect(delivered.delivery.delivered && delivered.delivery.attempts == 1 && delivered.delivery.lastStatus == 204)

        // The lease (the database's clock): one holder; its renewal; another once it lapsed; a
        // release frees it. Outcomes are recorded only by the holder.
        #expect(try await events.lease("webhook", holder: "one", seconds: 30))
        #expect(try await events.lease("webhook", holder: "two", seconds: 30) == false)
        #expect(try await events.lease("webhook", holder: "one", seconds: 30))
        _ = try await h.db.write("UPDATE vault_leases SET until_at = 0")
        #expect(try await events.lease("webhook", holder: "two", seconds: 30))
        #expect(try await events.lease("webhook", holder: "one", seconds: 30) == false)
        let last = try #require(try await events.due(now: retry, limit: 10).first)
        try await events.record([(last.seq, .delivered(status: 200))], at: retry, holder: "one")
        #expect(try await events.get(last.id)?.delivery.delivered == false, "a lapsed holder records nothing")
        try await events.record([(last.seq, .delivered(status: 200))], at: retry, holder: "two")
        #expect(try await events.get(last.id)?.delivery.delivered == true)
        try await events.release("webhook", holder: "one")
        #expect(try await events.lease("webhook", holder: "one", seconds: 30) == false, "only the holder's release frees it")
        try await events.release("webhook", holder: "two")
        #expect(try await events.lease("webhook", holder: "one", seconds: 30))
    }

    @Test(arguments: Backend.available)
    func listsNewestFirstWithFiltersAndPurgesPastTheRetention(_ backend: Backend) async throws {
        let h = try await backend.make()
        defer { Task { await h.cleanup() } }
        let tokens = SQLTokenStore(database: h.db), events = EventStore(database: h.db)
        var made: [String] = []
        for _ in 0..<7 {
            let r = record(try sampleEnvelope(), at: Self.t0)
            try await tokens.insert(r)
            made.append(r.token)
        }
        #expect(try await tokens.delete(made[0]))
        let walked = try await ListingSuiteTests.walk(limit: 3, id: \EventRecord.id) { q in try await events.list(q, type: nil, object: nil) }
        #expect(walked.sizes == [3, 3, 2] && walked.more == [true, true, false])
        let all = try await events.list(ListQuery(limit: 100), type: nil, object: nil).items
        #expect(all.map(\.id) == walked.ids && all.first?.type == "token.deleted" && all.map(\.objectID).dropFirst() == ArraySlice(made.reversed()))
        #expect(try await events.list(ListQuery(), type: "token.deleted", object: nil).items.count == 1)
        #expect(try await events.list(ListQuery(), type: "token.*", object: nil).items.count == 8)
        #expect(try await events.list(ListQuery(), type: "payment.*", object: nil).items.isEmpty)
        #expect(try await events.list(ListQuery(), type: nil, object: made[0]).items.map(\.type) == ["token.deleted", "token.created"])
        #expect(try await events.list(ListQuery(startingAfter: "evt_000000000000000000000000"), type: nil, object: nil) == .unknownCursor)
        #expect(try await events.purge(before: Date().addingTimeInterval(-3600)) == 0)
        #expect(try await events.purge(before: Date().addingTimeInterval(60)) == 8)
    }
}

extension ListPage {
    var items: [Item] {
        if case .page(let items, _) = self { return items }
        return []
    }
}
