import Foundation
import Testing

/// What the sidecar's memory grows with, and its bounds.
///
/// On PostgreSQL its memory does not grow with the statements it runs.
/// PostgresNIO's pool (1.33) starts a keep-alive timer, and an idle-timeout timer for a connection
/// above its minimum, each time a connection goes back to it, and each such timer kept about
/// 0.75 KiB: a sidecar grew by about 1.5 KiB per statement outside a transaction, without end.
/// The store now opens every connection as a minimum one and sends no keep-alive query
/// (`StoreLocation.PostgresLocation.configuration()`), and the pool starts no timer.
@Suite(.serialized, .ownThread) struct MemoryCLITests {
    static func rssAnonKiB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
        }
        return -1
    }

    @Test(.enabled(if: GatewayCLITests.postgresSocket != nil, "needs VAULT_TEST_POSTGRES_SOCKET (scripts/test)"))
    func aSidecarOnPostgreSQLDoesNotGrowWithItsStatements() throws {
        let store = try GatewayCLITests.postgresStore()
        var s = try ServeCLITests.Sidecar()
        defer { s.process?.terminate(); s.remove() }
        try s.start(extra: ["--store", store])
        let (status, body) = try s.curl("POST", "/v1/tokens", #"{"card":{"number":"4242424242424242","exp_month":12,"exp_year":2030}}"#)
        #expect(status == 201, "\(body)")
        let token = try #require((try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["token"] as? String)
        // One curl process reads the token `count` times over one kept-alive connection: each
        // read is one statement through the pool (a lease and a release).
        func reads(_ count: Int) throws {
            let config = s.dir + "/reads.curl"
            let line = "url = \"http://vault/v1/tokens/\(token)\"\noutput = \"/dev/null\"\n"
            try String(repeating: line, count: count).write(toFile: config, atomically: true, encoding: .utf8)
            let r = try run("/usr/bin/env", ["curl", "-s", "--fail-early", "-f", "--unix-socket", s.socket, "--config", config])
            #expect(r.status == 0, "\(r.stderr)")
        }
        let pid = try #require(s.process?.processIdentifier)
        try reads(1_000)
        let before = Self.rssAnonKiB(pid)
        try reads(8_000)
        let after = Self.rssAnonKiB(pid)
        #expect(before > 0 && after > 0)
        // With the pool's timers: about 12,000 KiB more for 8,000 reads (about 6,000 with one
        // timer a release). Without: under 1,000.
        #expect(after - before < 3 * 1024, "the sidecar grew by \(after - before) KiB over 8,000 reads")
    }

    /// `--held-cvcs-max` bounds the CVCs held in memory: past it the oldest are dropped first, and
    /// their tokens show `has_cvc: false` (they pay without one).
    @Test func heldCVCsAreBoundedBySetting() throws {
        var s = try ServeCLITests.Sidecar()
        defer { s.process?.terminate(); s.remove() }
        try s.start(extra: ["--held-cvcs-max", "2"])
        var tokens: [String] = []
        for number in ["4242424242424242", "5555555555554444", "4000056655665556"] {
            let (status, body) = try s.curl("POST", "/v1/tokens", #"{"card":{"number":"\#(number)","exp_month":12,"exp_year":2030,"cvc":"123"}}"#)
            #expect(status == 201, "\(body)")
            tokens.append(try #require((try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["token"] as? String))
        }
        func hasCVC(_ token: String) throws -> Bool? {
            let (status, body) = try s.curl("GET", "/v1/tokens/\(token)")
            #expect(status == 200, "\(body)")
            return (try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["has_cvc"] as? Bool
        }
        #expect(try hasCVC(tokens[0]) == false)
        #expect(try hasCVC(tokens[1]) == true)
        #expect(try hasCVC(tokens[2]) == true)
    }
}
