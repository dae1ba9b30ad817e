import Foundation
import Testing

/// `vault import` and `vault export` end to end with the real binary (issue 17, item 5;
/// docs/portability.md), on SQLite and (with scripts/test) PostgreSQL: mappings over CSV and JSON
/// lines, sealed input, rejects by line and code with nothing of a card in any output, dedupe
/// within a file and against the store, a kill -9 mid-import and the rerun, and an export that
/// PyNaCl opens line by line.
@Suite(.serialized, .ownThread) struct PortabilityCLITests {
    static var stores: [String] { GatewayCLITests.postgresSocket == nil ? ["sqlite"] : ["sqlite", "postgres"] }

    /// A scratch directory, a gateway-zone keys directory (one pair, a fingerprint key), a store.
    struct Scratch {
        let dir: String
        let keys: TestKeys
        let store: String

        init(_ backend: String) throws {
            keys = try TestKeys()
            dir = keys.dir + "/work"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            store = backend == "postgres" ? try GatewayCLITests.postgresStore() : "sqlite:\(dir)/vault.sqlite"
        }

        /// Writes an input file (plaintext cards: removed by `remove`, even when the suite keeps
        /// its artifacts for the leak scan; everything the vault wrote is kept).
        func write(_ name: String, _ text: String) throws -> String {
            try FileManager.default.createDirectory(atPath: dir + "/inputs", withIntermediateDirectories: true)
            let path = dir + "/inputs/" + name
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: dir + "/inputs")
            keys.remove()
        }

        /// The SQLite store's files as text (empty on PostgreSQL).
        func storeBytes() -> String {
            ["vault.sqlite", "vault.sqlite-wal"].map { (try? Data(contentsOf: URL(fileURLWithPath: dir + "/" + $0))).map { String(decoding: $0, as: UTF8.self) } ?? "" }.joined()
        }

        func read(_ name: String) -> String { (try? String(contentsOfFile: dir + "/" + name, encoding: .utf8)) ?? "" }

        func importing(_ input: String, _ extra: [String]) throws -> RunResult {
            try vault(["import", input, "--store", store, "--keys", keys.dir, "--out", dir + "/map.csv", "--rejects", dir + "/rejects.jsonl"] + extra, input: Data())
        }

        /// line → (token, outcome) from the mapping file.
        func mapping() -> [Int: (token: String, outcome: String)] {
            var out: [Int: (String, String)] = [:]
            for row in read("map.csv").split(separator: "\n").dropFirst() {
                let f = row.split(separator: ",").map(String.init)
                if f.count == 3, let line = Int(f[0]) { out[line] = (f[1], f[2]) }
            }
            return out
        }

        func rejects() -> [[String: Any]] {
            read("rejects.jsonl").split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
    }

    /// A Luhn-valid Visa number of 16 digits, distinct for each `n` (not one of the public test numbers).
    static func card(_ n: Int) -> String {
        let body = "4" + String(format: "%014d", 10_000_000 + n * 7919)
        let digits = body.compactMap { $0.wholeNumberValue }
        var sum = 0
        for (i, d) in digits.reversed().enumerated() {
            let v = i % 2 == 0 ? d * 2 : d
            sum += v > 9 ? v - 9 : v
        }
        return body + String((10 - sum % 10) % 10)
    }

    /// No generated card number (nor a public test number) in `text`.
    static func leaks(_ text: String, _ cards: [String]) -> Bool {
        containsPAN(text) || cards.contains { text.contains($0) }
    }

    @Test(arguments: stores)
    func csvAndJSONLinesWithMappingRejectsAndDedupe(_ backend: String) throws {
        let s = try Scratch(backend)
        defer { s.remove() }
        let cards = (0..<200).map(Self.card)
        // Line 1 is the header; data rows from line 2. Rows 10..19 repeat rows 0..9 (dedupe in the
        // file); three rows are bad: a wrong check digit, an expired card, broken quoting.
        var csv = "ref,card_number,expiry,holder\n"
        for i in 0..<200 {
            let number = (10..<20).contains(i) ? cards[i - 10] : cards[i]
            switch i {
            case 50: csv += "r\(i),\(String(number.dropLast()) + String((Int(String(number.last!))! + 1) % 10)),12/30,A\n"
            case 51: csv += "r\(i),\(number),01/20,B\n"
            case 52: csv += "r\(i),\"\(number),12/30,C\n"
            // Metadata is never card data nor control characters (the rules of POST /v1/tokens).
            case 60: csv += "\(Self.card(900)),\(number),12/2030,D\n"
            case 61: csv += "r\u{1}\(i),\(number),12/2030,E\n"
            default: csv += "r\(i),\"\(number.prefix(4)) \(number.dropFirst(4))\",12/2030,\"Holder \"\"\(i)\"\"\"\n"
            }
        }
        let input = try s.write("cards.csv", csv)
        let first = try s.importing(input, ["--map", "number=card_number", "--map", "exp=expiry", "--map", "name=holder", "--map", "metadata.ref=ref"])
        #expect(first.status == 1 && first.stderr.contains("IMPORT_ROWS_REJECTED"), "\(first.stderr)")
        #expect(first.out.contains("imported 185, duplicates 10, rejected 5"), "\(first.out)")
        let map = s.mapping()
        #expect(map.count == 195)
        for i in 10..<20 {
            #expect(map[i + 2]?.token == map[i - 10 + 2]?.token && map[i + 2]?.outcome == "duplicate", "line \(i + 2)")
        }
        #expect(Set(map.values.map(\.token)).count == 185)
        let rejects = s.rejects()
        #expect(rejects.map { $0["line"] as? Int } == [52, 53, 54, 62, 63])
        #expect(rejects.map { $0["code"] as? String } == ["LUHN_CHECK_FAILED", "CARD_EXPIRED", "IMPORT_ROW_MALFORMED", "REQUEST_FIELD_CARD_NUMBER", "METADATA_INVALID"])
        for text in [first.out, first.stderr, s.read("map.csv"), s.read("rejects.jsonl"), s.storeBytes()] { #expect(!Self.leaks(text, cards + [Self.card(900)])) }

        // The same command again: nothing more is made, the mapping is the same.
        let again = try s.importing(input, ["--map", "number=card_number", "--map", "exp=expiry", "--map", "name=holder", "--map", "metadata.ref=ref"])
        #expect(again.out.contains("imported 185, duplicates 10, rejected 5"), "\(again.out)")
        #expect(s.mapping().mapValues(\.token) == map.mapValues(\.token))

        // JSON lines naming cards already stored: duplicates of their tokens; new ones imported,
        // a stored card with another expiry (a reissue) among them.
        var jsonl = ""
        for i in 0..<5 { jsonl += #"{"pan":"\#(cards[i])","mm":12,"yy":"30","other":{"x":[1,2]}}"# + "\n" }
        jsonl += #"{"pan":"\#(Self.card(500))","mm":"7","yy":2031}"# + "\n"
        jsonl += #"{"pan":"\#(cards[5])","mm":"3","yy":2032}"# + "\n" + "\n" + "[1]\n"
        let jin = try s.write("more.jsonl", jsonl)
        let second = try s.importing(jin, ["--map", "number=pan", "--map", "exp_month=mm", "--map", "exp_year=yy"])
        #expect(second.out.contains("imported 2, duplicates 5, rejected 1"), "\(second.out) \(second.stderr)")
        let jmap = s.mapping()
        for i in 0..<5 { #expect(jmap[i + 1]?.token == map[i + 2]?.token && jmap[i + 1]?.outcome == "duplicate") }
        #expect(jmap[7]?.outcome == "imported" && jmap[7]?.token != map[7]?.token, "a reissue is another token")
        #expect(s.rejects().first?["line"] as? Int == 9 && s.rejects().first?["code"] as? String == "IMPORT_ROW_MALFORMED")

        // A mapping naming a CVC, or a column the header lacks, is refused before anything is read.
        let cvc = try s.importing(input, ["--map", "number=card_number", "--map", "cvc=holder"])
        #expect(cvc.status == 6 && cvc.stderr.contains("IMPORT_MAPPING_INVALID"), "\(cvc.stderr)")
        let missing = try s.importing(input, ["--map", "number=pan", "--map", "exp=expiry"])
        #expect(missing.status == 6 && missing.stderr.contains("IMPORT_MAPPING_INVALID"), "\(missing.stderr)")
    }

    @Test(arguments: stores)
    func sealedInputNeedsNoPlaintextFile(_ backend: String) throws {
        let s = try Scratch(backend)
        defer { s.remove() }
        let other = try TestKeys()
        defer { other.remove() }
        let cards = (0..<30).map { Self.card(1000 + $0) }
        var csv = "id,card\n"
        for (i, number) in cards.enumerated() {
            let pub = i == 29 ? other.pub : s.keys.pub   // the last is sealed to another vault's key
            let sealed = try vault(["seal", "--key", pub], input: Data(#"{"number":"\#(number)","exp_month":11,"exp_year":2031,"cvc":"123"}"#.utf8))
            csv += "c\(i),\(sealed.out.trimmingCharacters(in: .whitespacesAndNewlines))\n"
        }
        let input = try s.write("sealed.csv", csv)
        let r = try s.importing(input, ["--map", "sealed=card"])
        #expect(r.out.contains("imported 29, duplicates 0, rejected 1"), "\(r.out) \(r.stderr)")
        #expect(s.rejects().first?["code"] as? String == "KEY_MISMATCH" && s.rejects().first?["line"] as? Int == 31)

        // Exported again, no CVC comes out (none was ever stored).
        let opened = try Self.exportAndOpen(s, ["--all"])
        #expect(opened.count == 29)
        #expect(opened.allSatisfy { $0["cvc"] == nil && ($0["exp_year"] as? Int) == 2031 })
        #expect(Set(opened.compactMap { $0["number"] as? String }) == Set(cards.prefix(29)))
    }

    @Test(arguments: stores)
    func killedImportResumesWithOneTokenPerLine(_ backend: String) throws {
        let s = try Scratch(backend)
        defer { s.remove() }
        let cards = (0..<2000).map { Self.card(5000 + $0) }
        var csv = "number,exp_month,exp_year\n"
        for (i, c) in cards.enumerated() { csv += "\(c),\(1 + i % 12),\(2030 + i % 5)\n" }
        let input = try s.write("big.csv", csv)
        let args = ["import", input, "--store", s.store, "--keys", s.keys.dir, "--out", s.dir + "/map.csv", "--rejects", s.dir + "/rejects.jsonl"]
        let first = Process()
        first.executableURL = URL(fileURLWithPath: vaultBinary)
        first.arguments = args + ["--batch", "50", "--max-rate", "800"]
        first.standardOutput = FileHandle.nullDevice
        first.standardError = FileHandle.nullDevice
        try first.run()
        // At 800 lines/s the file needs about 2.5 s: killed after about one.
        usleep(1_000_000)
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        #expect(first.terminationReason == .uncaughtSignal)
        #expect(!FileManager.default.fileExists(atPath: s.dir + "/map.csv"), "killed before the mapping was written")

        let second = try vault(args, input: Data())
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.out.contains("imported 2000, duplicates 0, rejected 0"), "\(second.out)")
        #expect(second.stderr.contains("import lines:"), "plain progress lines when not a terminal: \(second.stderr)")
        let map = s.mapping()
        #expect(map.count == 2000 && Set(map.values.map(\.token)).count == 2000)
        // The store holds exactly one token per card: an export of everything has 2000 lines.
        let opened = try Self.exportAndOpen(s, ["--all"])
        #expect(opened.count == 2000)
        #expect(Set(opened.compactMap { $0["number"] as? String }) == Set(cards))
    }

    @Test(arguments: stores)
    func exportOpensWithPyNaClAndRefusesWhatItCannot(_ backend: String) throws {
        let s = try Scratch(backend)
        defer { s.remove() }
        let cards = (0..<40).map { Self.card(9000 + $0) }
        var csv = "number,exp\n"
        for c in cards { csv += "\(c),03/29\n" }
        #expect(try s.importing(try s.write("c.csv", csv), []).status == 0)
        let map = s.mapping()
        let tokens = (2...41).compactMap { map[$0]?.token }
        #expect(tokens.count == 40)

        // Selected tokens: their lines only, in the order given, each opening to its own card.
        let audit = s.dir + "/audit.log"
        let recipient = try TestKeys()
        defer { recipient.remove() }
        let out = s.dir + "/some.jsonl"
        let r = try vault(
            ["export", "--recipient", recipient.pub, "--token", tokens[3], "--token", tokens[7], "--out", out, "--store", s.store, "--keys", s.keys.dir,
             "--audit-log", audit], input: Data())
        #expect(r.status == 0, "\(r.stderr)")
        let mode = (try FileManager.default.attributesOfItem(atPath: out)[.posixPermissions] as? Int) ?? 0
        #expect(mode == 0o600)
        let lines = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n").map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(lines.map { $0["token"] as? String } == [tokens[3], tokens[7]])
        #expect(lines.allSatisfy { ($0["sealed"] as? String)?.hasPrefix("vault:v1:\(recipient.kid):") == true && ($0["fingerprint"] as? String)?.hasPrefix("fp1_") == true })
        let opened = try Self.open(out, with: recipient.key)
        #expect(opened.map { $0["number"] as? String } == [cards[3], cards[7]])
        #expect(opened.allSatisfy { $0.keys.sorted() == ["exp_month", "exp_year", "number"] && $0["exp_month"] as? Int == 3 })
        let auditText = (try? String(contentsOfFile: audit, encoding: .utf8)) ?? ""
        #expect(auditText.components(separatedBy: "\"export_card\"").count - 1 == 2 && auditText.contains("\"export\""))
        #expect(try vault("audit", "verify", audit).status == 0)
        for text in [r.out, r.stderr, auditText, try String(contentsOfFile: out, encoding: .utf8)] { #expect(!Self.leaks(text, cards)) }

        // --ids: one id a line, comments skipped.
        let idsFile = try s.write("ids.txt", "# one token\n\(tokens[5])\n")
        let viaIDs = try vault(["export", "--recipient", recipient.pub, "--ids", idsFile, "--store", s.store, "--keys", s.keys.dir], input: Data())
        #expect(viaIDs.status == 0 && viaIDs.out.split(separator: "\n").count == 1 && viaIDs.out.contains(tokens[5]), "\(viaIDs.stderr)")

        // An existing output is not overwritten; an unknown token, or a card number given as one,
        // stops the export before anything is written.
        let again = try vault(["export", "--recipient", recipient.pub, "--all", "--out", out, "--store", s.store, "--keys", s.keys.dir], input: Data())
        #expect(again.status == 7 && again.stderr.contains("OUTPUT_FILE_EXISTS"), "\(again.stderr)")
        for bad in ["tok_aaaaaaaaaaaaaaaaaaaaaaaaaa", cards[0]] {
            let unknown = try vault(
                ["export", "--recipient", recipient.pub, "--token", tokens[0], "--token", bad, "--out", s.dir + "/x.jsonl", "--store", s.store, "--keys", s.keys.dir],
                input: Data())
            #expect(unknown.status == 9 && unknown.stderr.contains("TOKEN_NOT_FOUND") && !Self.leaks(unknown.stderr, cards), "\(unknown.stderr)")
            #expect(!FileManager.default.fileExists(atPath: s.dir + "/x.jsonl"))
        }

        // Without the secret key: a keys directory with only public keys is refused, one with
        // another vault's secret key cannot open the envelopes (and leaves no file).
        let publicOnly = s.dir + "/public-only"
        try FileManager.default.createDirectory(atPath: publicOnly, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: s.keys.pub, toPath: publicOnly + "/\(s.keys.kid).pub")
        let noKey = try vault(["export", "--recipient", recipient.pub, "--all", "--store", s.store, "--keys", publicOnly], input: Data())
        #expect(noKey.status == 2 && noKey.stderr.contains("KEY_FILE_NOT_FOUND") && noKey.out.isEmpty, "\(noKey.stderr)")
        let wrong = try vault(["export", "--recipient", recipient.pub, "--all", "--out", s.dir + "/w.jsonl", "--store", s.store, "--keys", recipient.dir], input: Data())
        #expect(wrong.status == 3 && wrong.stderr.contains("KEY_MISMATCH"), "\(wrong.stderr)")
        #expect(!FileManager.default.fileExists(atPath: s.dir + "/w.jsonl"))
    }

    /// A customer's stored instruments (attached through the sidecar, with a CVC at tokenize)
    /// come out with their customer, openable, and without the CVC; an unknown customer is refused.
    @Test(arguments: stores)
    func exportsACustomersInstruments(_ backend: String) throws {
        let s = try PaymentsCLITests.Stack()
        defer { s.stop(s.sidecar); s.stop(s.gateway); removeScratch(s.dir) }
        s.store = backend == "postgres" ? try GatewayCLITests.postgresStore() : "sqlite:\(s.dir)/tokens.sqlite"
        let store = try #require(s.store)
        try s.startGateway()
        try s.startSidecar()
        func json(_ text: String) -> [String: Any] { (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:] }
        let (made, body) = try s.curl(s.sidecarSocket, "POST", "/v1/customers", #"{"reference":"crm-export"}"#)
        #expect(made == 201, "\(body)")
        let customer = try #require(json(body)["id"] as? String)
        let cards = [Self.card(20_001), Self.card(20_002)]
        var instruments: [String] = []
        for number in cards {
            let (_, tokenBody) = try s.curl(s.sidecarSocket, "POST", "/v1/tokens", #"{"card":{"number":"\#(number)","exp_month":6,"exp_year":2032,"cvc":"123"}}"#)
            let token = try #require(json(tokenBody)["token"] as? String, "\(tokenBody)")
            let (attached, instrumentBody) = try s.curl(s.sidecarSocket, "POST", "/v1/customers/\(customer)/instruments", #"{"token":"\#(token)"}"#)
            #expect(attached == 201, "\(instrumentBody)")
            instruments.append(try #require(json(instrumentBody)["id"] as? String))
        }
        let recipient = try TestKeys()
        defer { recipient.remove() }
        let out = s.dir + "/customer.jsonl"
        let r = try vault(["export", "--recipient", recipient.pub, "--customer", customer, "--out", out, "--store", store, "--keys", s.dir + "/gateway-keys"], input: Data())
        #expect(r.status == 0, "\(r.stderr)")
        let lines = ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n").map { json(String($0)) }
        #expect(Set(lines.compactMap { $0["instrument"] as? String }) == Set(instruments))
        #expect(lines.allSatisfy { $0["customer"] as? String == customer && $0["token"] == nil })
        let opened = try Self.open(out, with: recipient.key)
        #expect(Set(opened.compactMap { $0["number"] as? String }) == Set(cards))
        #expect(opened.allSatisfy { $0["cvc"] == nil && $0["exp_month"] as? Int == 6 && $0["exp_year"] as? Int == 2032 })

        let unknown = try vault(["export", "--recipient", recipient.pub, "--customer", "cus_nosuchcustomer", "--store", store, "--keys", s.dir + "/gateway-keys"], input: Data())
        #expect(unknown.status == 1 && unknown.stderr.contains("CUSTOMER_NOT_FOUND") && unknown.out.isEmpty, "\(unknown.stderr)")
    }

    /// Exports with `extra` to a fresh recipient and opens every line with PyNaCl.
    static func exportAndOpen(_ s: Scratch, _ extra: [String]) throws -> [[String: Any]] {
        let recipient = try TestKeys()
        defer { recipient.remove() }
        let out = s.dir + "/export-\(UUID().uuidString).jsonl"
        let r = try vault(["export", "--recipient", recipient.pub, "--out", out, "--store", s.store, "--keys", s.keys.dir] + extra, input: Data())
        #expect(r.status == 0, "\(r.stderr)")
        return try open(out, with: recipient.key)
    }

    /// Opens the `sealed` of every line of an export with one PyNaCl `SealedBox.decrypt` each.
    static func open(_ path: String, with secretKey: String) throws -> [[String: Any]] {
        let script = """
            import base64, json, sys
            from nacl.public import PrivateKey, SealedBox
            sk = open(sys.argv[1]).read().strip()
            assert sk.startswith("vault:sk:v1:")
            box = SealedBox(PrivateKey(base64.b64decode(sk[len("vault:sk:v1:"):])))
            for line in open(sys.argv[2]):
                sealed = json.loads(line)["sealed"]
                print(box.decrypt(base64.b64decode(sealed.split(":", 3)[3])).decode())
            """
        let r = try run(python, ["python3", "-c", script, secretKey, path])
        #expect(r.status == 0, "\(r.stderr)")
        return r.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}
