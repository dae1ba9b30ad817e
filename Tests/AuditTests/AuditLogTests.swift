import Audit
import Foundation
import Testing
import VaultCrypto
#if canImport(Glibc)
import Glibc
#endif

/// The audit log on real files: the chain verifies, each kind of tampering is caught at the
/// right line, several writers (instances and tasks) keep one chain, refused values never reach
/// the file, and a torn last line is sealed by a `log_repair` line.
@Suite struct AuditLogTests {
    // MARK: Support

    final class TempDir {
        let path: String
        init() {
            var template = Array("/tmp/vault-audit-XXXXXX".utf8CString)
            path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
        func file(_ name: String = "audit.log") -> String { path + "/" + name }
    }

    func bytes(_ path: String) -> [UInt8] {
        (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? []
    }

    func lines(_ path: String) -> [String] {
        String(decoding: bytes(path), as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLast().map { $0 }
    }

    /// Replaces the file's contents with `lines`, each newline-terminated.
    func rewrite(_ path: String, _ lines: [String]) throws {
        try Data(lines.map { $0 + "\n" }.joined().utf8).write(to: URL(fileURLWithPath: path))
    }

    /// Appends raw bytes, as another process (or a crash mid-write) would.
    func appendRaw(_ path: String, _ text: String) {
        let fd = open(path, O_WRONLY | O_APPEND)
        precondition(fd >= 0)
        _ = text.withCString { write(fd, $0, strlen($0)) }
        close(fd)
    }

    func hashHex(_ line: String) -> String {
        Array(line.utf8).withUnsafeBytes { Hash.blake2b256($0) }.map { String(format: "%02x", $0) }.joined()
    }

    func event(_ i: Int) -> AuditEvent {
        switch i % 5 {
        case 0: AuditEvent(action: "tokenize", uid: 1000, token: "tok_aaaabbbbccccddddeeeeffff\(i % 10)")
        case 1: AuditEvent(action: "pay", outcome: "CARD_DECLINED", uid: 1001, token: "tok_x\(i)", payment: "pay_y\(i)", customer: "cus_z")
        case 2: AuditEvent(action: "rewrap", kid: "0123456789abcdef", detail: [("rewrapped", i), ("skipped", 0), ("failed", -1)])
        case 3: AuditEvent(action: "open", outcome: "ENVELOPE_FIELD_CORRUPT", kid: "fedcba9876543210", envelope: "env_0123456789abcdef0123456789abcdef")
        default: AuditEvent(action: "key_reload", uid: 0)
        }
    }

    /// A log of `count` varied lines, closed.
    func makeLog(_ dir: TempDir, count: Int) throws -> String {
        let path = dir.file()
        let log = try AuditLog(path: path, process: "sidecar")
        for i in 0..<count { #expect(log.record(event(i))) }
        log.close()
        return path
    }

    // MARK: Writing and verifying

    @Test func aChainOfManyLinesVerifies() throws {
        let dir = TempDir()
        let path = dir.file()
        let log = try AuditLog(path: path, process: "gateway")
        for i in 0..<2000 { log.record(event(i)) }
        let head = log.head
        log.close()
        #expect(log.failures == 0 && log.invalidEvents == 0)
        let all = lines(path)
        #expect(all.count == 2000)
        let report = AuditVerifier.verify(path: path)
        #expect(report.problem == nil)
        #expect(report.lines == 2000 && report.lastSeq == 2000)
        #expect(report.head == hashHex(all.last!))
        #expect(report.head == head)
        #expect(AuditVerifier.verify(path: path, expectHead: head).isValid)
        #expect(AuditVerifier.verify(path: path, expectHead: head.uppercased()).isValid)
        #expect(AuditVerifier.verify(path: path, anchor: hashHex(all[999])).isValid)
        // Each line chains to the one before.
        #expect(all[0].hasSuffix("\"prev\":\"" + String(repeating: "0", count: 64) + "\"}"))
        for k in 1..<all.count where !all[k].hasSuffix("\"prev\":\"\(hashHex(all[k - 1]))\"}") {
            Issue.record("line \(k + 1) does not chain to line \(k)")
            break
        }
    }

    @Test func theLineLayoutIsExact() throws {
        let dir = TempDir()
        let path = dir.file()
        let log = try AuditLog(path: path, process: "sidecar")
        log.record(AuditEvent(
            action: "rewrap", uid: 1000, token: "tok_abc", payment: "pay_x", customer: "cus_y", kid: "0123456789abcdef",
            envelope: "env_z", detail: [("rewrapped", 10), ("skipped", 0), ("failed", -1)]))
        log.record(AuditEvent(action: "key_add", outcome: "KEY_FILE_EXISTS"))
        log.record(AuditEvent(action: "read", uid: UInt32.max, token: "tok_q", detail: [("big", Int.max), ("small", Int.min)]))
        log.close()
        let all = lines(path)
        #expect(all.count == 3)
        let time = #""time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z""#
        let first = #"^\{"seq":1,"# + time + #","process":"sidecar","uid":1000,"action":"rewrap","token":"tok_abc","payment":"pay_x","customer":"cus_y","kid":"0123456789abcdef","envelope":"env_z","outcome":"ok","detail":\{"rewrapped":10,"skipped":0,"failed":-1\},"prev":"0{64}"\}$"#
        #expect(all[0].range(of: first, options: .regularExpression) != nil, "\(all[0])")
        let second = #"^\{"seq":2,"# + time + #","process":"sidecar","action":"key_add","outcome":"KEY_FILE_EXISTS","prev":"[0-9a-f]{64}"\}$"#
        #expect(all[1].range(of: second, options: .regularExpression) != nil, "\(all[1])")
        #expect(all[2].contains(#""uid":4294967295,"#))
        #expect(all[2].contains(#""detail":{"big":9223372036854775807,"small":-9223372036854775808}"#))
        #expect(AuditVerifier.verify(path: path).isValid)

        // The time is now, in UTC.
        let stamp = String(all[1].split(separator: "\"")[5])
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = try #require(parser.date(from: stamp))
        #expect(abs(date.timeIntervalSinceNow) < 60)
    }

    @Test func aNewFileIsMode0600() throws {
        let dir = TempDir()
        let path = dir.file()
        let log = try AuditLog(path: path, process: "cli")
        log.record(AuditEvent(action: "key_add", uid: getuid()))
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
    }

    // MARK: Tampering

    @Test func anEditedByteIsCaughtAtTheNextLine() throws {
        let dir = TempDir()
        let path = try makeLog(dir, count: 20)
        var all = lines(path)
        // Line 11 (a `tokenize` line): one character of its token changed, still well-formed.
        #expect(all[10].contains("tok_aaaabbbb"))
        all[10] = all[10].replacingOccurrences(of: "tok_aaaabbbb", with: "tok_aaaabbbc")
        try rewrite(path, all)
        let report = AuditVerifier.verify(path: path)
        #expect(report.problem?.line == 12)
        #expect(report.problem?.kind == .broken)
        #expect(report.problem?.reason.hasPrefix("prev does not match line 11 (line 11 was edited") == true, "\(String(describing: report.problem))")

        // An edit that breaks the layout is caught on the edited line itself.
        all[10] = all[10].replacingOccurrences(of: "tok_aaaabbbc", with: "tok aaaabbbc")
        try rewrite(path, all)
        let bad = AuditVerifier.verify(path: path)
        #expect(bad.problem?.line == 11)
        #expect(bad.problem?.reason.hasPrefix("not an audit line (\"token\" is not an id") == true, "\(String(describing: bad.problem))")
    }

    @Test func anEditedSeqIsCaughtOnItsLine() throws {
        let dir = TempDir()
        let path = try makeLog(dir, count: 20)
        var all = lines(path)
        all[9] = all[9].replacingOccurrences(of: "{\"seq\":10,", with: "{\"seq\":19,")
        try rewrite(path, all)
        #expect(AuditVerifier.verify(path: path).problem?.description == "line 10: seq 19 after 9 (a line was removed, or the lines reordered)")
    }

    @Test func aRemovedMiddleLineIsCaught() throws {
        let dir = TempDir()
        let path = try makeLog(dir, count: 20)
        var all = lines(path)
        all.remove(at: 9)
        try rewrite(path, all)
        let report = AuditVerifier.verify(path: path)
        #expect(report.problem?.description == "line 10: seq 11 after 9 (a line was removed, or the lines reordered)")
        #expect(report.lines == 10)
    }

    @Test func aRemovedFirstLineIsCaught() throws {
        let dir = TempDir()
        let path = try makeLog(dir, count: 5)
        try rewrite(path, Array(lines(path).dropFirst()))
        #expect(AuditVerifier.verify(path: path).problem?.description == "line 1: seq 2, but a file starts at seq 1 (lines were removed from the start?)")
    }

    @Test func swappedLinesAreCaught() throws {
        let dir = TempDir()
        let path = try makeLog(dir, count: 20)
        var all = lines(path)
        all.swapAt(9, 10)
        try rewrite(path, all)
        #expect(AuditVerifier.verify(path: path).problem?.description == "line 10: seq 11 after 9 (a line was removed, or the lines reordered)")
    }

    @Test func anInsertedLineIsCaught() throws {
        let dir = TempDir()
        let path = try makeLog(dir, count: 20)
        var all = lines(path)
        // A repeated line, and a forged line renumbered to fit: both break the chain.
        all.insert(all[4], at: 5)
        try rewrite(path, all)
        #expect(AuditVerifier.verify(path: path).problem?.description == "line 6: seq 5 after 5 (a line was inserted or repeated, or the lines reordered)")
        all = lines(path)
        all.remove(at: 5)
        var forged = all[4].replacingOccurrences(of: "{\"seq\":5,", with: "{\"seq\":6,")
        forged = forged.replacingOccurrences(of: #""prev":"[0-9a-f]{64}""#, with: "\"prev\":\"\(hashHex(all[4]))\"", options: .regularExpression)
        all.insert(forged, at: 5)
        try rewrite(path, all)
        #expect(AuditVerifier.verify(path: path).problem?.description == "line 7: seq 6 after 6 (a line was inserted or repeated, or the lines reordered)")
    }

    @Test func aTruncatedTailIsCaughtOnlyAgainstAHead() throws {
        let dir = TempDir()
        let path = try makeLog(dir, count: 20)
        let full = AuditVerifier.verify(path: path)
        #expect(full.isValid && full.lines == 20)
        let all = lines(path)
        try rewrite(path, Array(all.prefix(17)))

        // Without an anchor, a shorter chain is still a chain.
        let cut = AuditVerifier.verify(path: path)
        #expect(cut.isValid && cut.lines == 17 && cut.lastSeq == 17)
        #expect(cut.head == hashHex(all[16]))

        let headCheck = AuditVerifier.verify(path: path, expectHead: full.head)
        #expect(headCheck.problem?.line == 17)
        #expect(headCheck.problem?.reason.contains("lines were removed from the end") == true)
        let anchorCheck = AuditVerifier.verify(path: path, anchor: full.head)
        #expect(anchorCheck.problem?.reason.hasPrefix("no line has the anchor's hash") == true)

        // An anchor taken earlier still holds; so does the exact head of what is there.
        #expect(AuditVerifier.verify(path: path, anchor: hashHex(all[9])).isValid)
        #expect(AuditVerifier.verify(path: path, expectHead: cut.head).isValid)
        #expect(AuditVerifier.verify(path: path, expectHead: "xyz").problem?.reason == "the expected head is not 64 hex characters")
    }

    @Test func emptyAndMissingFiles() throws {
        let dir = TempDir()
        let path = dir.file()
        try AuditLog(path: path, process: "sidecar").close()
        let empty = AuditVerifier.verify(path: path)
        #expect(empty.isValid && empty.lines == 0 && empty.head == String(repeating: "0", count: 64))
        let missing = AuditVerifier.verify(path: dir.file("nope.log"))
        #expect(missing.problem?.kind == .unreadable)
        #expect(missing.problem?.line == nil)
        rewriteText(dir.file("other.log"), "hello\n")
        #expect(AuditVerifier.verify(path: dir.file("other.log")).problem?.description == "line 1: not an audit line (expected {\"seq\": at the start at byte 1)")
    }

    func rewriteText(_ path: String, _ text: String) {
        try? Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    // MARK: Resuming and sharing

    @Test func reopeningResumesSeqAndPrev() throws {
        let dir = TempDir()
        let path = dir.file()
        var log = try AuditLog(path: path, process: "cli")
        for i in 0..<5 { log.record(event(i)) }
        log.close()
        log = try AuditLog(path: path, process: "cli")
        #expect(log.lastSeq == 5)
        for i in 5..<10 { log.record(event(i)) }
        log.close()
        let all = lines(path)
        #expect(all[5].hasPrefix("{\"seq\":6,"))
        #expect(all[5].hasSuffix("\"prev\":\"\(hashHex(all[4]))\"}"))
        let report = AuditVerifier.verify(path: path)
        #expect(report.isValid && report.lines == 10 && report.lastSeq == 10)
    }

    @Test func twoWritersOnOneFileKeepOneChain() async throws {
        let dir = TempDir()
        let path = dir.file()
        let a = try AuditLog(path: path, process: "sidecar")
        let b = try AuditLog(path: path, process: "cli")
        // Interleaved: each writer finds the file moved by the other and re-reads its tail.
        for i in 0..<100 {
            a.record(event(i))
            b.record(AuditEvent(action: "key_promote", uid: 0, kid: "00112233445566ff"))
        }
        #expect(AuditVerifier.verify(path: path).lines == 200)

        // Concurrent: tasks on both writers at once.
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<8 {
                let log = t % 2 == 0 ? a : b
                group.addTask {
                    for i in 0..<250 { log.record(self.event(i + t)) }
                }
            }
        }
        a.close()
        b.close()
        #expect(a.failures == 0 && b.failures == 0)
        let report = AuditVerifier.verify(path: path)
        #expect(report.problem == nil)
        #expect(report.lines == 2200 && report.lastSeq == 2200)
        let processes = lines(path).map { $0.contains("\"process\":\"cli\"") }
        #expect(processes.filter { $0 }.count == 1100)
    }

    // MARK: Refused values

    @Test func valuesOutsideTheCharacterSetsAreNeverWritten() throws {
        let dir = TempDir()
        let path = dir.file()
        let log = try AuditLog(path: path, process: "sidecar")
        let refused: [AuditEvent] = [
            AuditEvent(action: "tokenize", uid: 7, token: "tok abc"),
            AuditEvent(action: "tokenize", token: "4242-4242-4242-4242"),
            AuditEvent(action: "tokenize", token: "4242424242424242"),
            AuditEvent(action: "pay", customer: "4000_0000_0000_0002"),
            AuditEvent(action: "pay", payment: "pay_\u{e9}t\u{e9}"),
            AuditEvent(action: "pay", payment: "pay_\"x\":1"),
            AuditEvent(action: "open", envelope: "env_" + String(repeating: "a", count: 77)),
            AuditEvent(action: "open", envelope: ""),
            AuditEvent(action: "open", kid: "0123456789ABCDEF"),
            AuditEvent(action: "open", kid: "tok_abc"),
            AuditEvent(action: "Tokenize"),
            AuditEvent(action: "tokenize card 4111111111111111"),
            AuditEvent(action: String(repeating: "a", count: 33)),
            AuditEvent(action: "log_repair", outcome: "AUDIT_TORN_LINE", detail: [("torn_bytes", 3)]),
            AuditEvent(action: "invalid_event"),
            AuditEvent(action: "tokenize", outcome: "ok\n"),
            AuditEvent(action: "tokenize", outcome: "Luhn check failed"),
            AuditEvent(action: "tokenize", outcome: ""),
            AuditEvent(action: "rewrap", detail: [("Rewrapped", 1)]),
            AuditEvent(action: "rewrap", detail: [("n", 1), ("n", 2)]),
            AuditEvent(action: "rewrap", detail: (0..<17).map { (String(repeating: "c", count: $0 + 1), $0) }),
        ]
        for e in refused { #expect(log.record(e), "\(e.action)") }
        // At the limits: accepted.
        let longest = "env_" + String(repeating: "a", count: 76)
        log.record(AuditEvent(action: String(repeating: "a", count: 32), outcome: String(repeating: "E", count: 64), envelope: longest))
        log.close()
        #expect(log.invalidEvents == refused.count)
        #expect(log.failures == 0)

        // The chain hashes are random hex and may hold "4000" by chance: look at everything else.
        let text = String(decoding: bytes(path), as: UTF8.self)
            .replacingOccurrences(of: #""prev":"[0-9a-f]{64}""#, with: "", options: .regularExpression)
            .replacingOccurrences(of: #""time":"[0-9TZ:.\-]+""#, with: "", options: .regularExpression)
        for needle in ["4242", "4000", "4111", "tok abc", "pay_", "Luhn", "Tokenize", "ABCDEF", "Rewrapped", "\"n\""] {
            #expect(!text.contains(needle), "\(needle) reached the file")
        }
        let all = lines(path)
        #expect(all.count == refused.count + 1)
        for line in all.dropLast() {
            #expect(line.contains("\"action\":\"invalid_event\",\"outcome\":\"AUDIT_EVENT_INVALID\",\"prev\""), "\(line)")
        }
        #expect(all[0].contains("\"uid\":7,"))
        #expect(all.last!.contains(longest))
        #expect(AuditVerifier.verify(path: path).isValid)
        #expect(!AuditEvent(action: "tokenize", token: "4242-4242-4242-4242").isValid)
        #expect(AuditEvent(action: "tokenize", token: "tok_2v5x7qk3mz4a6b7c2d3e4f5g6h").isValid)
    }

    // MARK: Torn and foreign tails

    @Test func aTornLastLineIsSealedByALogRepairLine() throws {
        let dir = TempDir()
        let path = try makeLog(dir, count: 5)
        let torn = #"{"seq":6,"time":"2026-11-23T15:00:00.123Z","process":"sidecar","action":"toke"#
        appendRaw(path, torn)

        // Until a writer seals it, the file does not verify.
        #expect(AuditVerifier.verify(path: path).problem?.description
            == "line 6: incomplete last line (a write cut short by a crash or a full disk; the next writer seals it with a log_repair line)")

        let log = try AuditLog(path: path, process: "sidecar")
        #expect(log.lastSeq == 5)
        log.record(AuditEvent(action: "tokenize", token: "tok_after"))
        log.close()
        let all = lines(path)
        #expect(all.count == 8)
        #expect(all[5] == torn)
        #expect(all[6].hasPrefix("{\"seq\":6,"))
        #expect(all[6].contains("\"action\":\"log_repair\",\"outcome\":\"AUDIT_TORN_LINE\",\"detail\":{\"torn_bytes\":\(torn.utf8.count)},\"prev\":\"\(hashHex(torn))\"}"))
        #expect(all[7].hasPrefix("{\"seq\":7,"))
        let report = AuditVerifier.verify(path: path)
        #expect(report.problem == nil)
        #expect(report.tornLines == [6] && report.lines == 8 && report.lastSeq == 7)

        // The torn line is still bound by the chain: editing it is caught.
        var edited = all
        edited[5] = torn.replacingOccurrences(of: "toke", with: "tokx")
        try rewrite(path, edited)
        #expect(AuditVerifier.verify(path: path).problem?.description.hasPrefix("line 7: prev does not match line 6") == true)
        // A broken line not followed by a log_repair line is not excused.
        edited = all
        edited.remove(at: 6)
        try rewrite(path, edited)
        #expect(AuditVerifier.verify(path: path).problem?.description.hasPrefix("line 6: not an audit line (") == true)
    }

    @Test func aTornLineWrittenWhileOpenIsSealedToo() throws {
        let dir = TempDir()
        let path = dir.file()
        let log = try AuditLog(path: path, process: "sidecar")
        for i in 0..<3 { log.record(event(i)) }
        appendRaw(path, "{\"seq\":4,\"ti")   // another process died mid-write
        log.record(event(3))
        log.close()
        let report = AuditVerifier.verify(path: path)
        #expect(report.problem == nil)
        #expect(report.tornLines == [4] && report.lastSeq == 5)
    }

    @Test func aTornFirstLineIsSealed() throws {
        let dir = TempDir()
        let path = dir.file()
        rewriteText(path, "{\"seq\":1")
        let log = try AuditLog(path: path, process: "gateway")
        log.record(event(0))
        log.close()
        let report = AuditVerifier.verify(path: path)
        #expect(report.problem == nil)
        #expect(report.tornLines == [1] && report.lastSeq == 2)
    }

    @Test func aLastLineMissingOnlyItsNewlineIsContinued() throws {
        let dir = TempDir()
        let path = try makeLog(dir, count: 5)
        var data = bytes(path)
        data.removeLast()
        try Data(data).write(to: URL(fileURLWithPath: path))
        #expect(AuditVerifier.verify(path: path).isValid)
        let log = try AuditLog(path: path, process: "sidecar")
        log.record(event(5))
        log.close()
        let report = AuditVerifier.verify(path: path)
        #expect(report.problem == nil)
        #expect(report.lines == 6 && report.tornLines.isEmpty)
    }

    @Test func aFileThatIsNotAnAuditLogIsRefused() throws {
        let dir = TempDir()
        let path = dir.file()
        rewriteText(path, "hello\n")
        #expect(throws: AuditError.self) { try AuditLog(path: path, process: "sidecar") }
        do {
            _ = try AuditLog(path: path, process: "sidecar")
        } catch {
            #expect(error.code == .logTailInvalid)
            #expect(error.message.contains("is not an audit line"))
        }

        // Garbage appended under a running writer: it stops appending and counts failures.
        let other = dir.file("b.log")
        let log = try AuditLog(path: other, process: "sidecar")
        #expect(log.record(event(0)))
        appendRaw(other, "not json\n")
        #expect(!log.record(event(1)))
        #expect(log.failures == 1)
        #expect(log.lastError?.code == .logTailInvalid)
        #expect(lines(other).count == 2)
    }

    // MARK: Lifecycle

    @Test func processNamesAreChecked() {
        let dir = TempDir()
        #expect(throws: AuditError(.processInvalid, "process \"worker\" is not sidecar, gateway or cli")) {
            try AuditLog(path: dir.file(), process: "worker")
        }
    }

    @Test func syncEveryLineAndRecordAfterClose() throws {
        let dir = TempDir()
        let path = dir.file()
        let log = try AuditLog(path: path, process: "sidecar", syncInterval: .zero)
        for i in 0..<50 { #expect(log.record(event(i))) }
        log.sync()
        log.close()
        log.close()
        #expect(!log.record(event(0)))
        #expect(log.failures == 1)
        #expect(log.lastError?.code == .logClosed)
        #expect(AuditVerifier.verify(path: path).lines == 50)
    }
}
