#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import VaultCrypto

/// The tamper-evident audit log writer: one JSON line per event, each chained to the one before
/// by BLAKE2b-256 (format: docs/audit-log.md; check a file with `AuditVerifier`).
///
/// - Thread-safe: appends are serialised by a pthread mutex, and several processes may share one
///   file: each append takes `flock(LOCK_EX)`, and when the file's size is not what this writer
///   last left it re-reads the last line for the true `seq` and `prev`.
/// - `record` never throws: a failed append is counted in `failures` (`lastError` says why) and
///   the caller may log it. Each record is one `write(2)` of the whole line.
/// - Durability: `fdatasync` at most once per `syncInterval`, done by the first `record` after the
///   interval has passed (no timer thread), and by `sync()` and `close()`. A process crash loses
///   nothing that `record` returned for (the line is in the kernel); a power loss or kernel crash
///   may lose the lines of the last interval, or of the last burst before an idle spell if nobody
///   called `sync()`. `syncInterval` 0 syncs every line.
/// - A torn last line (a crash or a full disk mid-write) is sealed, never overwritten: the next
///   append writes a newline and a `log_repair` line (outcome `AUDIT_TORN_LINE`,
///   `detail.torn_bytes`) whose `prev` is the hash of the torn bytes, so the chain stays whole and
///   the verifier accepts exactly that shape.
/// - An event whose values break the character sets is replaced by an `invalid_event` line
///   (outcome `AUDIT_EVENT_INVALID`, only the uid kept) and counted in `invalidEvents`: the
///   attempt is on record, none of its values is.
public final class AuditLog: @unchecked Sendable {
    /// The file appended to.
    public let path: String
    /// `sidecar`, `gateway` or `cli`.
    public let process: String
    /// The longest time between an append and its `fdatasync` while records keep coming.
    public let syncInterval: Duration

    private let writeFD: Int32
    private let readFD: Int32
    private let syncNanos: UInt64
    private let processBytes: [UInt8]

    /// Guards everything below except `fdsClosed`.
    private let mutex = PThreadMutex()
    /// Held around `fdatasync` and while closing, so a sync never meets a closed descriptor.
    /// Never held together with `mutex`: a sync runs after `record` has released it, so appends
    /// from other threads go on while the disk catches up.
    private let syncMutex = PThreadMutex()
    private var fdsClosed = false   // guarded by syncMutex

    private var closed = false
    private var seq: Int64
    private var prev: [UInt8]
    private var nextPrev = [UInt8](repeating: 0, count: 32)
    private var pending: Pending
    /// The size this writer last saw or left; -1 when unknown (after a short write).
    private var expectedSize: Int64
    private var buffer: [UInt8] = []
    private var timeText = Array("0000-00-00T00:00:00.000Z".utf8)
    private var timeSecond = Int.min
    private var lastSync: UInt64 = 0
    private var _failures = 0
    private var _invalidEvents = 0
    private var _lastError: AuditError?

    /// How the file ends, as far as chaining the next line goes.
    enum Pending: Equatable {
        /// With a newline.
        case none
        /// With a whole audit line missing only its newline: write the newline first.
        case newline
        /// With `n` bytes of a torn line: write a newline and a `log_repair` line first.
        case torn(Int)
    }

    /// Opens (creating, mode 0600) the log at `path` for appending, resuming `seq` and `prev`
    /// from its last line.
    ///
    /// - Parameters:
    ///   - process: `sidecar`, `gateway` or `cli`.
    ///   - syncInterval: the longest time between an append and its `fdatasync` under load;
    ///     `.zero` (or less) syncs every line.
    /// - Throws: `AUDIT_PROCESS_INVALID`; `AUDIT_LOG_UNAVAILABLE` (cannot open, lock or read it,
    ///   or not a regular file); `AUDIT_LOG_TAIL_INVALID` (its last line is not an audit line).
    public init(path: String, process: String, syncInterval: Duration = .seconds(1)) throws(AuditError) {
        guard AuditFormat.processes.contains(process) else {
            throw AuditError(.processInvalid, "process \"\(process)\" is not sidecar, gateway or cli")
        }
        let w = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard w >= 0 else { throw AuditError(.logUnavailable, "cannot open \(path): \(AuditLog.reason(errno))") }
        let r = open(path, O_RDONLY | O_CLOEXEC)
        guard r >= 0 else {
            let e = errno
            closeDescriptor(w)
            throw AuditError(.logUnavailable, "cannot open \(path) for reading: \(AuditLog.reason(e))")
        }
        let tail: Tail
        let size: Int64
        do throws(AuditError) {
            var sw = stat(), sr = stat()
            guard fstat(w, &sw) == 0, fstat(r, &sr) == 0 else {
                throw AuditError(.logUnavailable, "cannot examine \(path): \(AuditLog.reason(errno))")
            }
            guard sw.st_dev == sr.st_dev, sw.st_ino == sr.st_ino else {
                throw AuditError(.logUnavailable, "\(path) was replaced while being opened")
            }
            guard sw.st_mode & mode_t(S_IFMT) == mode_t(S_IFREG) else { throw AuditError(.logUnavailable, "\(path) is not a regular file") }
            try AuditLog.lock(w, path: path)
            defer { _ = flock(w, LOCK_UN) }
            guard fstat(w, &sw) == 0 else { throw AuditError(.logUnavailable, "cannot examine \(path): \(AuditLog.reason(errno))") }
            size = Int64(sw.st_size)
            tail = try AuditLog.readTail(fd: r, size: size, path: path)
        } catch {
            closeDescriptor(w)
            closeDescriptor(r)
            throw error
        }
        self.path = path
        self.process = process
        self.processBytes = Array(process.utf8)
        let interval = max(syncInterval, .zero)
        self.syncInterval = interval
        let c = interval.components
        self.syncNanos = UInt64(c.seconds) * 1_000_000_000 + UInt64(c.attoseconds / 1_000_000_000)
        self.writeFD = w
        self.readFD = r
        self.seq = tail.seq
        self.prev = tail.prev
        self.pending = tail.pending
        self.expectedSize = size
        buffer.reserveCapacity(2 * AuditFormat.maxLineBytes + 2)
    }

    deinit { close() }

    /// Appends one event. Never throws: returns false and counts a failure when the line could
    /// not be written (`lastError` says why). An invalid event is written as `invalid_event`.
    @discardableResult
    public func record(_ event: AuditEvent) -> Bool {
        let valid = event.isValid
        var syncNow = false
        let written = mutex.withLock { () -> Bool in
            guard !closed else {
                noteFailure(AuditError(.logClosed, "\(path) is closed"))
                return false
            }
            let ok: Bool
            if valid {
                ok = append(event)
            } else {
                _invalidEvents += 1
                ok = append(AuditEvent(action: AuditFormat.invalidAction, outcome: AuditFormat.invalidOutcome, uid: event.uid))
            }
            if ok {
                let now = Self.monotonicNanos()
                if syncNanos == 0 || now &- lastSync >= syncNanos {
                    lastSync = now
                    syncNow = true
                }
            }
            return ok
        }
        if syncNow { syncToDisk() }
        return written
    }

    /// `fdatasync` now: the server calls it at shutdown (or `close()`), and may call it after an
    /// event that must be on disk before it answers.
    public func sync() {
        mutex.withLock { lastSync = Self.monotonicNanos() }
        syncToDisk()
    }

    /// Syncs and closes the file; later records fail with `AUDIT_LOG_CLOSED`. Idempotent.
    public func close() {
        let wasOpen = mutex.withLock { () -> Bool in
            defer { closed = true }
            return !closed
        }
        guard wasOpen else { return }
        syncMutex.withLock {
            _ = Self.dataSync(writeFD)
            closeDescriptor(writeFD)
            closeDescriptor(readFD)
            fdsClosed = true
        }
    }

    /// Appends that failed (I/O errors, a file that stopped being an audit log, records after close).
    public var failures: Int { mutex.withLock { _failures } }
    /// Events refused for their values and written as `invalid_event`.
    public var invalidEvents: Int { mutex.withLock { _invalidEvents } }
    /// The latest failure, for the caller's log.
    public var lastError: AuditError? { mutex.withLock { _lastError } }
    /// The `seq` of the last line this writer knows of (another process may have appended since).
    public var lastSeq: Int64 { mutex.withLock { seq } }
    /// The hash of the last line this writer knows of, 64 hex: an anchor for `AuditVerifier`.
    public var head: String { mutex.withLock { HexDigits.encode(prev) } }

    // MARK: Appending (under `mutex`)

    private func noteFailure(_ error: AuditError) {
        _failures += 1
        _lastError = error
    }

    /// One append under `flock`: resync with the file if another writer moved it, then write the
    /// line (after a newline and a `log_repair` line when the file ends torn) in one `write(2)`.
    private func append(_ event: AuditEvent) -> Bool {
        do throws(AuditError) { try Self.lock(writeFD, path: path) } catch {
            noteFailure(error)
            return false
        }
        defer { _ = flock(writeFD, LOCK_UN) }
        var st = stat()
        guard fstat(writeFD, &st) == 0 else {
            noteFailure(AuditError(.logUnavailable, "cannot examine \(path): \(Self.reason(errno))"))
            return false
        }
        let size = Int64(st.st_size)
        if size != expectedSize {
            do throws(AuditError) {
                let tail = try Self.readTail(fd: readFD, size: size, path: path)
                seq = tail.seq
                prev = tail.prev
                pending = tail.pending
                expectedSize = size
            } catch {
                noteFailure(error)
                return false
            }
        }

        formatTime()
        buffer.removeAll(keepingCapacity: true)
        var newSeq = seq
        nextPrev.withUnsafeMutableBytes { n in prev.withUnsafeBytes { n.copyMemory(from: $0) } }
        switch pending {
        case .none:
            break
        case .newline:
            buffer.append(10)
        case .torn(let count):
            buffer.append(10)
            newSeq += 1
            appendLine(
                AuditEvent(action: AuditFormat.repairAction, outcome: AuditFormat.repairOutcome, detail: [(AuditFormat.tornBytesKey, count)]),
                seq: newSeq)
            buffer.append(10)
        }
        newSeq += 1
        appendLine(event, seq: newSeq)
        buffer.append(10)

        let total = buffer.count
        var done = 0
        var failure: Int32 = 0
        buffer.withUnsafeBytes { b in
            while done < total {
                let r = write(writeFD, b.baseAddress! + done, total - done)
                if r > 0 {
                    done += r   // a short write (full disk, signal) is continued under the lock
                } else if r < 0, errno == EINTR {
                    continue
                } else {
                    failure = r < 0 ? errno : EIO
                    break
                }
            }
        }
        guard done == total else {
            noteFailure(AuditError(.logWriteFailed, "cannot append to \(path): \(Self.reason(failure))"))
            // Part of a line in the file is a torn tail: re-read it, and seal it, next time.
            expectedSize = done == 0 ? size : -1
            return false
        }
        seq = newSeq
        swap(&prev, &nextPrev)
        pending = .none
        expectedSize = size + Int64(total)
        return true
    }

    /// Appends one line (no newline) chained to `nextPrev`, then puts the line's hash in `nextPrev`.
    private func appendLine(_ e: AuditEvent, seq: Int64) {
        let start = buffer.count
        put("{\"seq\":")
        putInteger(seq)
        put(",\"time\":\"")
        buffer.append(contentsOf: timeText)
        put("\",\"process\":\"")
        buffer.append(contentsOf: processBytes)
        put("\"")
        if let uid = e.uid {
            put(",\"uid\":")
            putInteger(Int64(uid))
        }
        put(",\"action\":\"")
        buffer.append(contentsOf: e.action.utf8)
        put("\"")
        if let v = e.token { put(",\"token\":\""); buffer.append(contentsOf: v.utf8); put("\"") }
        if let v = e.payment { put(",\"payment\":\""); buffer.append(contentsOf: v.utf8); put("\"") }
        if let v = e.customer { put(",\"customer\":\""); buffer.append(contentsOf: v.utf8); put("\"") }
        if let v = e.kid { put(",\"kid\":\""); buffer.append(contentsOf: v.utf8); put("\"") }
        if let v = e.envelope { put(",\"envelope\":\""); buffer.append(contentsOf: v.utf8); put("\"") }
        if let v = e.group { put(",\"group\":\""); buffer.append(contentsOf: v.utf8); put("\"") }
        put(",\"outcome\":\"")
        buffer.append(contentsOf: e.outcome.utf8)
        put("\"")
        if !e.detail.isEmpty {
            put(",\"detail\":{")
            for (k, (name, value)) in e.detail.enumerated() {
                if k > 0 { put(",") }
                put("\"")
                buffer.append(contentsOf: name.utf8)
                put("\":")
                putInteger(Int64(value))
            }
            put("}")
        }
        put(",\"prev\":\"")
        for b in nextPrev {
            buffer.append(HexDigits.table[Int(b >> 4)])
            buffer.append(HexDigits.table[Int(b & 15)])
        }
        put("\"}")
        buffer.withUnsafeBytes { b in
            nextPrev.withUnsafeMutableBytes { out in
                Hash.blake2b256(UnsafeRawBufferPointer(rebasing: b[start...]), into: out)
            }
        }
    }

    @inline(__always)
    private func put(_ s: StaticString) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    private func putInteger(_ value: Int64) {
        var magnitude = value.magnitude
        if value < 0 { buffer.append(45) }
        var digits = 1
        var probe = magnitude
        while probe >= 10 { probe /= 10; digits += 1 }
        let at = buffer.count
        buffer.append(contentsOf: repeatElement(48, count: digits))
        var k = at + digits - 1
        while k >= at {
            buffer[k] = 48 + UInt8(magnitude % 10)
            magnitude /= 10
            k -= 1
        }
    }

    /// UTC `YYYY-MM-DDTHH:MM:SS.mmmZ` of now into `timeText`; the part before the dot is redone
    /// once a second.
    private func formatTime() {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let second = Int(ts.tv_sec)
        if second != timeSecond {
            var t = time_t(second)
            var parts = tm()
            gmtime_r(&t, &parts)
            func put2(_ at: Int, _ v: Int32) {
                timeText[at] = 48 + UInt8(v / 10 % 10)
                timeText[at + 1] = 48 + UInt8(v % 10)
            }
            let year = Int32(parts.tm_year) + 1900
            put2(0, year / 100)
            put2(2, year % 100)
            put2(5, parts.tm_mon + 1)
            put2(8, parts.tm_mday)
            put2(11, parts.tm_hour)
            put2(14, parts.tm_min)
            put2(17, parts.tm_sec)
            timeSecond = second
        }
        let ms = Int(ts.tv_nsec) / 1_000_000
        timeText[20] = 48 + UInt8(ms / 100)
        timeText[21] = 48 + UInt8(ms / 10 % 10)
        timeText[22] = 48 + UInt8(ms % 10)
    }

    // MARK: Syncing

    private func syncToDisk() {
        var failure: Int32 = 0
        syncMutex.withLock {
            if !fdsClosed, Self.dataSync(writeFD) != 0 { failure = errno }
        }
        if failure != 0 {
            let error = AuditError(.logWriteFailed, "cannot sync \(path): \(Self.reason(failure))")
            mutex.withLock { noteFailure(error) }
        }
    }

    private static func dataSync(_ fd: Int32) -> Int32 {
        #if os(Linux)
        fdatasync(fd)
        #else
        fsync(fd)
        #endif
    }

    private static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    // MARK: The file's tail

    /// Where the file leaves the chain: the last `seq`, the hash to chain to, and what to write first.
    struct Tail {
        var seq: Int64
        var prev: [UInt8]
        var pending: Pending
    }

    private static func lock(_ fd: Int32, path: String) throws(AuditError) {
        while flock(fd, LOCK_EX) != 0 {
            if errno == EINTR { continue }
            throw AuditError(.logUnavailable, "cannot lock \(path): \(reason(errno))")
        }
    }

    /// Reads the end of the file (`size` bytes long) and finds its last line.
    ///
    /// - Ends with a newline: the last line must parse; chain to it.
    /// - Ends without one, and the unterminated line parses (only the newline was lost): chain to
    ///   it after writing the newline.
    /// - Ends with a torn line: chain to the torn bytes after a newline and a `log_repair` line;
    ///   `seq` comes from the last whole line before it, which must parse.
    static func readTail(fd: Int32, size: Int64, path: String) throws(AuditError) -> Tail {
        guard size > 0 else { return Tail(seq: 0, prev: [UInt8](repeating: 0, count: 32), pending: .none) }
        let want = Int(min(size, Int64(2 * AuditFormat.maxLineBytes + 2)))
        let start = size - Int64(want)
        var chunk = [UInt8](repeating: 0, count: want)
        var got = 0
        var failure: Int32 = 0
        chunk.withUnsafeMutableBytes { b in
            while got < want {
                let r = pread(fd, b.baseAddress! + got, want - got, off_t(start) + off_t(got))
                if r > 0 { got += r } else if r < 0, errno == EINTR { continue } else { failure = r < 0 ? errno : 0; break }
            }
        }
        guard got == want else {
            throw AuditError(.logUnavailable, failure != 0 ? "cannot read \(path): \(reason(failure))" : "\(path) shrank while being read")
        }
        return try chunk.withUnsafeBytes { b in
            Result { () throws(AuditError) in try tail(of: b, startingAt: start, path: path) }
        }.get()
    }

    /// The tail of the file from its last bytes `b`, which begin at offset `start`.
    private static func tail(of b: UnsafeRawBufferPointer, startingAt start: Int64, path: String) throws(AuditError) -> Tail {
        /// The line ending at `end` (exclusive): after the newline before it, or from the chunk's
        /// start when that is the file's start.
        func line(endingAt end: Int) throws(AuditError) -> Range<Int> {
            var k = end - 1
            while k >= 0, b[k] != 10 { k -= 1 }
            if k >= 0 { return k + 1..<end }
            guard start == 0 else {
                throw AuditError(.logTailInvalid, "the last line of \(path) is longer than \(AuditFormat.maxLineBytes) bytes: not an audit log")
            }
            return 0..<end
        }
        func parse(_ r: Range<Int>, _ which: String) throws(AuditError) -> AuditFormat.Line {
            do throws(AuditFormat.Malformed) {
                return try AuditFormat.parse(UnsafeRawBufferPointer(rebasing: b[r]))
            } catch {
                throw AuditError(.logTailInvalid, "\(which) of \(path) is not an audit line (\(error.reason)); not appending to it")
            }
        }
        func hash(_ r: Range<Int>) -> [UInt8] { Hash.blake2b256(UnsafeRawBufferPointer(rebasing: b[r])) }

        if b[b.count - 1] == 10 {
            let last = try line(endingAt: b.count - 1)
            return Tail(seq: try parse(last, "the last line").seq, prev: hash(last), pending: .none)
        }
        let partial = try line(endingAt: b.count)
        if let whole = try? AuditFormat.parse(UnsafeRawBufferPointer(rebasing: b[partial])) {
            return Tail(seq: whole.seq, prev: hash(partial), pending: .newline)
        }
        var seq: Int64 = 0
        if partial.lowerBound > 0 {
            seq = try parse(try line(endingAt: partial.lowerBound - 1), "the line before the torn end").seq
        }
        return Tail(seq: seq, prev: hash(partial), pending: .torn(partial.count))
    }

    static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
}

/// `close(2)`, out of reach of `AuditLog.close()`'s name.
private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}
