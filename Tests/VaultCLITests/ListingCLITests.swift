import Foundation
import Testing

/// Lists with the real binaries (README "Listing and search"): 25 payments paged 10/10/5 newest
/// first with `has_more`, a status filter, tokens found by the gateway's fingerprint, and the
/// coded refusals of bad query parameters.
@Suite(.serialized, .ownThread) struct ListingCLITests {
    @Test func paymentsPageNewestFirstAndTokensAreFoundByFingerprint() throws {
        let s = try PaymentsCLITests.Stack()
        defer {
            s.stop(s.sidecar)
            s.stop(s.gateway)
            removeScratch(s.dir)
        }
        try s.startGateway()
        try s.startSidecar()
        func json(_ text: String) throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not an object: \(text)")
        }
        var made: [String] = []
        for i in 0..<25 {
            // 4000000000000002 is declined by the sandbox: every fifth payment.
            let token = try s.tokenize(i % 5 == 0 ? "4000000000000002" : "4242424242424242")
            let (status, payment, body) = try s.pay(token, key: "list-\(i)", amount: 100 + i)
            #expect(status == 201, "\(body)")
            made.append(try #require(payment["id"] as? String))
        }
        var seen: [String] = [], sizes: [Int] = [], more: [Bool] = []
        var path = "/v1/payments?limit=10"
        while true {
            let (status, body) = try s.curl(s.sidecarSocket, "GET", path)
            #expect(status == 200, "\(body)")
            let page = try json(body)
            let items = try #require(page["data"] as? [[String: Any]])
            #expect(page["object"] as? String == "list")
            sizes.append(items.count)
            more.append(page["has_more"] as? Bool ?? false)
            seen += items.compactMap { $0["id"] as? String }
            guard more.last == true, let last = seen.last, sizes.count < 5 else { break }
            path = "/v1/payments?limit=10&starting_after=\(last)"
        }
        #expect(sizes == [10, 10, 5] && more == [true, true, false])
        // Made one after the other: newest first is the reverse order of making (ids break ties
        // within a millisecond, so compare as sets there and check the amounts' order overall).
        #expect(Set(seen) == Set(made) && seen.count == 25, "no duplicate, no gap")
        let (_, declinedBody) = try s.curl(s.sidecarSocket, "GET", "/v1/payments?status=declined&limit=100")
        let declined = try #require(try json(declinedBody)["data"] as? [[String: Any]])
        #expect(declined.count == 5 && declined.allSatisfy { $0["status"] as? String == "declined" }, "\(declinedBody)")
        let (_, firstBody) = try s.curl(s.sidecarSocket, "GET", "/v1/payments?limit=1")
        let newest = try #require(try json(firstBody)["data"] as? [[String: Any]]).first
        #expect(newest?["amount"] as? Int == 124, "the last payment made comes first: \(firstBody)")

        // A token found by the fingerprint the gateway gave it (filled in the background).
        let token = try s.tokenize("5555555555554444")
        var fingerprint: String?
        for _ in 0..<200 {
            let (_, body) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(token)")
            fingerprint = (try json(body)["card"] as? [String: Any])?["fingerprint"] as? String
            if fingerprint != nil { break }
            usleep(50_000)
        }
        let fp = try #require(fingerprint, "the gateway gave the token no fingerprint")
        let (found, foundBody) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens?fingerprint=\(fp)")
        let tokens = try #require(try json(foundBody)["data"] as? [[String: Any]])
        #expect(found == 200 && tokens.map { $0["token"] as? String } == [token] && !foundBody.contains("envelope"), "\(foundBody)")

        for (query, code) in [
            ("limit=0", "REQUEST_FIELD_INVALID"), ("limit=101", "REQUEST_FIELD_INVALID"), ("status=paid", "REQUEST_FIELD_INVALID"),
            ("created%5Bgte%5D=2026-13-01", "REQUEST_FIELD_INVALID"), ("starting_after=pay_nothing", "REQUEST_FIELD_INVALID"),
            ("sort=asc", "REQUEST_FIELD_UNKNOWN"),
        ] {
            let (status, body) = try s.curl(s.sidecarSocket, "GET", "/v1/payments?\(query)")
            #expect(status == 422 && body.contains(code), "\(query): \(body)")
        }
    }
}
