import Foundation
import Testing

/// Card-shaped tokens (docs/card-tokens.md) end to end with the real binaries, on SQLite and on
/// PostgreSQL: made by request and by the sidecar's default, resolved, listed, paid with, refused
/// for short cards, digits that name no token not found.
@Suite(.serialized, .ownThread) struct CardTokenCLITests {
    static var stores: [String] { GatewayCLITests.postgresSocket == nil ? ["sqlite"] : ["sqlite", "postgres"] }

    static func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }

    static func isLuhnValid(_ s: String) -> Bool {
        var total = 0
        for (i, c) in s.reversed().enumerated() {
            var d = Int(c.asciiValue! - 48)
            if i % 2 == 1 { d = d * 2 > 9 ? d * 2 - 9 : d * 2 }
            total += d
        }
        return total % 10 == 0
    }

    @Test(arguments: stores)
    func cardShapedTokensEndToEnd(_ backend: String) throws {
        let s = try PaymentsCLITests.Stack()
        try s.startGateway()
        let store = backend == "postgres" ? ["--store", try GatewayCLITests.postgresStore()] : []
        let audit = s.dir + "/audit.log"
        try s.startSidecar(extra: store + ["--audit-log", audit])
        let card = #""card":{"number":"4242 4242 4242 4242","exp_month":12,"exp_year":2030,"cvc":"123"}"#

        // Per request.
        let (made, body) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card),"token_format":"card"}"#)
        #expect(made == 201, "\(body)")
        let token = try #require(Self.json(body)["token"] as? String)
        #expect(token.count == 16 && token.hasPrefix("424242") && token.hasSuffix("4242") && token.allSatisfy(\.isNumber))
        #expect(!Self.isLuhnValid(token) && token != "4242424242424242")
        let (read, readBody) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(token)")
        #expect(read == 200 && readBody.contains(#""last4":"4242""#), "\(readBody)")
        let (listed, listBody) = try s.curl(s.sidecarSocket, "GET", "/v1/tokens?limit=5")
        #expect(listed == 200 && listBody.contains(token), "\(listBody)")
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens?starting_after=\(token)").0 == 200)

        // A payment by the card-shaped token; digits that name no token are not found.
        let (paid, payment, payBody) = try s.pay(token, key: PaymentsCLITests.key())
        #expect(paid == 201 && payment["status"] as? String == "succeeded" && payment["token"] as? String == token, "\(payBody)")
        let (missing, _, missingBody) = try s.pay("4242421234567890", key: PaymentsCLITests.key())
        #expect(missing == 404 && missingBody.contains("TOKEN_NOT_FOUND"), "\(missingBody)")

        // Its events name it; a customer's instrument is made from one.
        let (events, eventsBody) = try s.curl(s.sidecarSocket, "GET", "/v1/events?object=\(token)")
        #expect(events == 200 && eventsBody.contains("token.created"), "\(eventsBody)")
        let paymentID = try #require(payment["id"] as? String)
        let (_, paymentEvents) = try s.curl(s.sidecarSocket, "GET", "/v1/events?object=\(paymentID)")
        let paymentEvent = ((Self.json(paymentEvents)["data"] as? [[String: Any]])?.first?["data"] as? [String: Any])?["object"] as? [String: Any]
        #expect(paymentEvent?["token"] as? String == token, "a payment's events name its card-shaped token: \(paymentEvents)")
        let (_, second) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card),"token_format":"card"}"#)
        let attachable = try #require(Self.json(second)["token"] as? String)
        let (_, customer) = try s.curl(s.sidecarSocket, "POST", "/v1/customers", "{}")
        let customerID = try #require(Self.json(customer)["id"] as? String, "\(customer)")
        let (attached, attachBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customerID)/instruments", #"{"token":"\#(attachable)"}"#)
        #expect(attached == 201, "\(attachBody)")

        // The audit log names it as card_<digits> (an id of digits alone would be refused as a card number).
        let lines = (try? String(contentsOfFile: audit, encoding: .utf8)) ?? ""
        #expect(lines.contains(#""token":"card_\#(token)""#) && !lines.contains("invalid_event"), "\(lines)")

        // Too short a card (14 digits) is refused; a bad format is named.
        let diners = #"{"card":{"number":"36227206271667","exp_month":12,"exp_year":2030},"token_format":"card"}"#
        let (short, shortBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", diners)
        #expect(short == 422 && shortBody.contains("CARD_TOKEN_SPACE_TOO_SMALL") && !shortBody.contains("36227206271667"), "\(shortBody)")
        let (bad, badBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card),"token_format":"fpe"}"#)
        #expect(bad == 422 && badBody.contains("REQUEST_FIELD_INVALID"), "\(badBody)")

        // tok_ stays the default without the setting; with it, card is the default and tok is asked for.
        let (_, plain) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", "{\(card)}")
        #expect((Self.json(plain)["token"] as? String)?.hasPrefix("tok_") == true, "\(plain)")
        s.stop(s.sidecar)
        try s.startSidecar(extra: store + ["--token-format", "card"])
        let (_, byDefault) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", "{\(card)}")
        #expect((Self.json(byDefault)["token"] as? String)?.count == 16, "\(byDefault)")
        let (_, asked) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{\#(card),"token_format":"tok"}"#)
        #expect((Self.json(asked)["token"] as? String)?.hasPrefix("tok_") == true, "\(asked)")
        let other = try #require(Self.json(byDefault)["token"] as? String)
        let (deleted, _) = try s.curl(s.sidecarSocket, "DELETE", "/v1/tokens/\(other)")
        #expect(deleted == 204)
        #expect(try s.curl(s.sidecarSocket, "GET", "/v1/tokens/\(other)").0 == 404)
        // The CLI asks for one too (the card sealed at the door, or here with --key).
        let cli = try vault("tokenize", "--socket", s.sidecarSocket, "--token-format", "tok",
                            input: #"{"number":"4242424242424242","exp_month":12,"exp_year":2030}"#)
        #expect(cli.status == 0 && cli.out.contains(#""token":"tok_"#), "\(cli.stderr)")
        let pub = "\(s.dir)/sidecar-keys/" + (try FileManager.default.contentsOfDirectory(atPath: s.dir + "/sidecar-keys").first { $0.hasSuffix(".pub") } ?? "")
        let sealed = try vault("tokenize", "--socket", s.sidecarSocket, "--key", pub, input: #"{"number":"5555555555554444","exp_month":12,"exp_year":2030}"#)
        let sealedToken = Self.json(sealed.out)["token"] as? String ?? ""
        #expect(sealed.status == 0 && sealedToken.count == 16 && sealedToken.hasPrefix("555555") && sealedToken.hasSuffix("4444"), "\(sealed.stderr)")
        let shortCLI = try vault("tokenize", "--socket", s.sidecarSocket, input: #"{"number":"36227206271667","exp_month":12,"exp_year":2030}"#)
        #expect(shortCLI.status == 6 && shortCLI.stderr.contains("CARD_TOKEN_SPACE_TOO_SMALL"), "\(shortCLI.stderr)")
        // The legacy setting (`card_token_luhn_valid`) makes no Luhn-valid token any more (DESIGN §9):
        // a card-shaped token never passes a brand's rules; it still pays; an envelope gets one too.
        s.stop(s.sidecar)
        try s.startSidecar(extra: store + ["--token-format", "card", "--card-token-luhn-valid"])
        let (_, valid) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", "{\(card)}")
        let legacyToken = try #require(Self.json(valid)["token"] as? String, "\(valid)")
        #expect(!Self.isLuhnValid(legacyToken) && legacyToken.hasPrefix("424242"))
        let (paidValid, _, paidBody) = try s.pay(legacyToken, key: PaymentsCLITests.key())
        #expect(paidValid == 201, "\(paidBody)")
        let envelopeToken = try vault("tokenize", "--socket", s.sidecarSocket, "--key", pub, input: #"{"number":"5555555555554444","exp_month":12,"exp_year":2030}"#)
        #expect(envelopeToken.status == 0 && !Self.isLuhnValid(Self.json(envelopeToken.out)["token"] as? String ?? "4242424242424242"), "\(envelopeToken.stderr)")
        s.collectLogs()
        #expect(!s.logs.contains("4242424242424242"))
    }
}
