import Foundation
import SocketHTTP
import Testing

/// Query parameters of the list routes, read strictly (README "Listing and search").
@Suite struct QueryParametersTests {
    static let allowed: Set<String> = ["limit", "starting_after", "created[gte]", "created[lte]", "status", "fingerprint"]

    /// The code and field of the refusal of `query` (`CODE field`), or "read" when it is read.
    static func refusal(_ query: String, _ read: (QueryParameters) throws(APIError) -> Void = { _ in }) -> String {
        do throws(APIError) {
            try read(try QueryParameters(query: query, allowed: allowed))
            return "read"
        } catch {
            return "\(error.code.rawValue) \(error.field ?? "-")"
        }
    }

    @Test func namesAndValuesArePercentDecoded() throws {
        let p = try QueryParameters(query: "created%5Bgte%5D=2026-11-23T12%3A50%3A59Z&limit=25&status=succeeded", allowed: Self.allowed)
        #expect(try p.date("created[gte]") == Date(timeIntervalSince1970: 1_795_438_259))
        #expect(try p.int("limit", in: 1...100) == 25)
        #expect(try p.oneOf("status", ["succeeded", "declined"]) == "succeeded")
        #expect(try p.date("created[lte]") == nil && p["starting_after"] == nil)
        #expect(try QueryParameters(query: "created[lte]=2026-11-23T12:50:59.250Z", allowed: Self.allowed).date("created[lte]") != nil)
        #expect(try QueryParameters(query: "created[lte]=2026-11-23T13:50:59%2B01:00", allowed: Self.allowed).date("created[lte]")
                == Date(timeIntervalSince1970: 1_795_438_259), "an offset is allowed")
    }

    @Test func unknownRepeatedAndMalformedParametersAreRefusedNamingThem() {
        #expect(Self.refusal("sort=asc") == "REQUEST_FIELD_UNKNOWN sort")
        #expect(Self.refusal("limit=1&limit=2") == "REQUEST_FIELD_INVALID limit")
        for bad in ["limit=0", "limit=101", "limit=ten", "limit=-1", "limit=99999999999"] {
            #expect(Self.refusal(bad) { (p) throws(APIError) in _ = try p.int("limit", in: 1...100) } == "REQUEST_FIELD_INVALID limit", "\(bad)")
        }
        for bad in ["created[gte]=yesterday", "created[gte]=2026-11-23", "created[gte]=2026-11-23T12:50:59"] {
            #expect(Self.refusal(bad) { (p) throws(APIError) in _ = try p.date("created[gte]") } == "REQUEST_FIELD_INVALID created[gte]", "\(bad)")
        }
        #expect(Self.refusal("fingerprint=ABC") { (p) throws(APIError) in _ = try p.fingerprint() } == "REQUEST_FIELD_INVALID fingerprint")
        #expect(Self.refusal("starting_after=tok_x") { (p) throws(APIError) in _ = try p.id("starting_after", prefix: "pay_") }
                == "REQUEST_FIELD_INVALID starting_after")
        #expect(Self.refusal("status=paid") { (p) throws(APIError) in _ = try p.oneOf("status", ["succeeded"]) } == "REQUEST_FIELD_INVALID status")
        #expect(Self.refusal(String(repeating: "x", count: QueryParameters.maxBytes + 1)) == "REQUEST_FIELD_INVALID -")
    }

    /// A parameter name is the caller's free text: a card number sent as one is never echoed,
    /// neither in the message nor in the field (only a name's letters are).
    @Test func anUnknownNameIsNeverEchoedWithItsDigits() {
        for query in ["4242424242424242=1", "4242%204242%204242%204242=1", "pan4242424242424242=1"] {
            do throws(APIError) {
                _ = try QueryParameters(query: query, allowed: Self.allowed)
                Issue.record("\(query) was read")
            } catch {
                #expect(error.code == .requestFieldUnknown)
                let said = error.message + " " + (error.field ?? "")
                #expect(!said.contains("4242"), "\(said)")
            }
        }
        #expect(Self.refusal("pan4242424242424242=1") == "REQUEST_FIELD_UNKNOWN pan")
    }
}
