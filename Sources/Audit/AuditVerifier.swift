#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import VaultCrypto

/// The first thing wrong with an audit log file.
public struct AuditProblem: Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem.
    public enum Kind: Sendable, Equatable {
        /// The file could not be opened or read (the CLI's `IO_ERROR`, exit 7).
        case unreadable
        /// The file is not an intact chain of audit lines, or not the expected one (exit 1).
        case broken
    }

    /// What kind of problem.
    public let kind: Kind
    /// The 1-based line it is found at; nil for the file as a whole.
    public let line: Int?
    /// Plain words: what is wrong and what probably happened.
    public let reason: String

    /// A problem.
    public init(kind: Kind, line: Int?, reason: String) {
        self.kind = kind
        self.line = line
        self.reason = reason
    }

    /// `line N: reason`, or the reason alone.
    public var description: String { line.map { "line \($0): \(reason)" } ?? reason }
}

/// What `AuditVerifier` found.
public struct AuditReport: Sendable, Equatable {
    /// Lines read (when there is a problem: up to and including the line it is on).
    public var lines: Int
    /// The `seq` of the last audit line (0 for an empty file).
    public var lastSeq: Int64
    /// BLAKE2b-256 of the last line, 64 lowercase hex (64 zeros for an empty file): what the next
    /// line's `prev` will be. Keep it somewhere else as an anchor; only an anchor reveals lines
    /// removed from the end.
    public var head: String
    /// Lines that are torn writes sealed by the `log_repair` line after them (1-based).
    public var tornLines: [Int]
    /// The first problem; nil when the file verifies.
    public var problem: AuditProblem?

    /// True when there is no problem.
    public var isValid: Bool { problem == nil }
}

/// Checks an audit log file (docs/audit-log.md): every line of the exact layout and character
/// sets, `seq` 1, 2, 3…, each `prev` the hash of the line before (64 zeros on the first).
///
/// Editing, inserting, removing or reordering lines is caught at the first line where the chain
/// breaks. Removing lines at the end leaves a shorter, intact chain: only a head recorded
/// elsewhere (`expectHead`, `anchor`) reveals it. The hash is unkeyed: someone who may write the
/// file can also rewrite the whole chain after their edit, which again only an anchor kept out of
/// their reach reveals.
public enum AuditVerifier {
    /// Verifies the file at `path`.
    ///
    /// The file's size is taken under `flock(LOCK_SH)`, so a line being appended by a writer at
    /// that moment is not mistaken for a torn one; lines appended later are not read.
    ///
    /// - Parameters:
    ///   - expectHead: 64 hex: fail unless the last line's hash is exactly this (the file has not
    ///     grown or shrunk since the head was taken).
    ///   - anchor: 64 hex: fail unless some line's hash is this (the file still holds everything up
    ///     to an earlier head; lines appended since are fine).
    public static func verify(path: String, expectHead: String? = nil, anchor: String? = nil) -> AuditReport {
        var checker = ChainChecker()
        func report(_ problem: AuditProblem?) -> AuditReport {
            AuditReport(
                lines: checker.lineNumber, lastSeq: checker.lastSeq, head: HexDigits.encode(checker.prevHash),
                tornLines: checker.tornLines, problem: problem)
        }
        var expected: [UInt8]?
        if let expectHead {
            guard let h = HexDigits.decode32(expectHead) else {
                return report(AuditProblem(kind: .broken, line: nil, reason: "the expected head is not 64 hex characters"))
            }
            expected = h
        }
        if let anchor {
            guard let a = HexDigits.decode32(anchor) else {
                return report(AuditProblem(kind: .broken, line: nil, reason: "the anchor is not 64 hex characters"))
            }
            checker.anchor = a
        }

        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return report(unreadable("cannot open: \(AuditLog.reason(errno))")) }
        defer { _ = close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return report(unreadable("cannot examine: \(AuditLog.reason(errno))")) }
        guard st.st_mode & mode_t(S_IFMT) == mode_t(S_IFREG) else { return report(unreadable("not a regular file")) }
        // Writers append under LOCK_EX: with LOCK_SH held, no line is half-written.
        while flock(fd, LOCK_SH) != 0 {
            if errno == EINTR { continue }
            return report(unreadable("cannot lock: \(AuditLog.reason(errno))"))
        }
        let sized = fstat(fd, &st)
        _ = flock(fd, LOCK_UN)
        guard sized == 0 else { return report(unreadable("cannot examine: \(AuditLog.reason(errno))")) }

        var remaining = Int64(st.st_size)
        let readSize = 1 << 20
        var buffer = [UInt8](repeating: 0, count: readSize + AuditFormat.maxLineBytes + 1)
        var filled = 0
        while remaining > 0 {
            let want = Int(min(Int64(buffer.count - filled), remaining))
            var failure: Int32 = 0
            let got = buffer.withUnsafeMutableBytes { b -> Int in
                while true {
                    let r = read(fd, b.baseAddress! + filled, want)
                    if r < 0, errno == EINTR { continue }
                    if r < 0 { failure = errno }
                    return r
                }
            }
            if got < 0 { return report(unreadable("cannot read: \(AuditLog.reason(failure))")) }
            if got == 0 { break }   // shrank since the size was taken: check what is there
            filled += got
            remaining -= Int64(got)
            var problem: AuditProblem?
            let consumed = buffer.withUnsafeBytes { b -> Int in
                var lineStart = 0
                for i in 0..<filled where b[i] == 10 {
                    if let p = checker.check(UnsafeRawBufferPointer(rebasing: b[lineStart..<i]), terminated: true) {
                        problem = p
                        return i
                    }
                    lineStart = i + 1
                }
                return lineStart
            }
            if let problem { return report(problem) }
            if filled - consumed > AuditFormat.maxLineBytes {
                checker.lineNumber += 1
                return report(AuditProblem(kind: .broken, line: checker.lineNumber, reason: "not an audit line (longer than \(AuditFormat.maxLineBytes) bytes)"))
            }
            buffer.withUnsafeMutableBytes { b in
                if consumed > 0, filled > consumed {
                    b.baseAddress!.copyMemory(from: b.baseAddress! + consumed, byteCount: filled - consumed)
                }
            }
            filled -= consumed
        }
        if filled > 0 {
            let p = buffer.withUnsafeBytes { checker.check(UnsafeRawBufferPointer(rebasing: $0[0..<filled]), terminated: false) }
            if let p { return report(p) }
        }
        if let p = checker.finish() { return report(p) }
        if let expected, expected != checker.prevHash {
            return report(AuditProblem(
                kind: .broken, line: checker.lineNumber > 0 ? checker.lineNumber : nil,
                reason: "the head is \(HexDigits.encode(checker.prevHash)), not the expected \(HexDigits.encode(expected)) "
                    + "(lines were removed from the end, or added after the expected head was taken)"))
        }
        if checker.anchor != nil, checker.anchorLine == nil {
            return report(AuditProblem(
                kind: .broken, line: nil,
                reason: "no line has the anchor's hash (lines were removed from the end, back past the anchored line, or this is another file)"))
        }
        return report(nil)
    }

    private static func unreadable(_ reason: String) -> AuditProblem {
        AuditProblem(kind: .unreadable, line: nil, reason: reason)
    }
}

/// The chain rules, one line at a time.
private struct ChainChecker {
    var lineNumber = 0
    var lastSeq: Int64 = 0
    /// The hash of the last line read (torn or not): what the next `prev` must be.
    var prevHash = [UInt8](repeating: 0, count: 32)
    var tornLines: [Int] = []
    var anchor: [UInt8]?
    var anchorLine: Int?
    /// A line that did not parse, waiting for the `log_repair` line that must follow it.
    private var torn: (line: Int, count: Int, reason: String)?

    mutating func check(_ line: UnsafeRawBufferPointer, terminated: Bool) -> AuditProblem? {
        lineNumber += 1
        let n = lineNumber
        func broken(_ at: Int, _ reason: String) -> AuditProblem { AuditProblem(kind: .broken, line: at, reason: reason) }
        let parsed: AuditFormat.Line
        do throws(AuditFormat.Malformed) {
            parsed = try AuditFormat.parse(line)
        } catch {
            if let torn { return broken(torn.line, "not an audit line (\(torn.reason))") }
            if !terminated {
                return broken(n, "incomplete last line (a write cut short by a crash or a full disk; the next writer seals it with a log_repair line)")
            }
            torn = (n, line.count, error.reason)
            advance(line)
            return nil
        }
        if let t = torn {
            guard parsed.isRepair else { return broken(t.line, "not an audit line (\(t.reason))") }
        }
        if let p = seqProblem(parsed.seq) { return broken(n, p) }
        let matches = prevHash.withUnsafeBytes { AuditFormat.prev(of: line, at: parsed.prevOffset, equals: $0) }
        if !matches {
            if n == 1 {
                return broken(n, "prev is not 64 zeros (the first line of a file chains to nothing: lines were removed from the start?)")
            }
            return broken(n, "prev does not match line \(n - 1) (line \(n - 1) was edited, or a line was removed or inserted between them)")
        }
        if let t = torn {
            guard parsed.tornBytes == t.count else {
                return broken(n, "log_repair says the torn line had \(parsed.tornBytes ?? 0) bytes, line \(t.line) has \(t.count)")
            }
            tornLines.append(t.line)
            torn = nil
        }
        lastSeq = parsed.seq
        advance(line)
        return nil
    }

    /// A torn line with nothing after it to seal it.
    func finish() -> AuditProblem? {
        torn.map { AuditProblem(kind: .broken, line: $0.line, reason: "not an audit line (\($0.reason))") }
    }

    private func seqProblem(_ seq: Int64) -> String? {
        if lastSeq == 0 {
            return seq == 1 ? nil : "seq \(seq), but a file starts at seq 1 (lines were removed from the start?)"
        }
        if seq == lastSeq + 1 { return nil }
        if seq > lastSeq + 1 { return "seq \(seq) after \(lastSeq) (a line was removed, or the lines reordered)" }
        return "seq \(seq) after \(lastSeq) (a line was inserted or repeated, or the lines reordered)"
    }

    private mutating func advance(_ line: UnsafeRawBufferPointer) {
        prevHash.withUnsafeMutableBytes { Hash.blake2b256(line, into: $0) }
        if let anchor, anchor == prevHash { anchorLine = lineNumber }
    }
}
