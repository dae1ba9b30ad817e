import ArgumentParser
import Dispatch
import ServerCLI
import VaultCrypto

/// Streams standard input line by line through a transform on all cores, keeping order.
///
/// Each `read(2)` gives whatever input is ready; its complete lines form a batch, cut into chunks
/// (about four per worker, at least `minChunkLines` lines each). `workers` threads take the next
/// chunk as they finish one (a thread that is descheduled, or given harder lines, does not hold the
/// others up) and write into the chunk's own wiped output buffer. A batch's chunks are written out
/// in input order by a writer thread while the next batch is read and transformed, so output line
/// N always answers input line N. The first bad line stops the stream: everything before it is
/// written, the error names its line number.
struct LinePipeline: Sendable {
    /// Turns one line (without its newline) into output bytes (without a newline); returns the length.
    typealias Transform = @Sendable (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws(VaultError) -> Int

    /// An upper bound on a line's output length.
    let maxOutput: @Sendable (Int) -> Int
    let transform: Transform
    var workers = StandardIO.processorCount
    var readSize = 256 * 1024
    /// Fewest lines per unit of work handed to a worker; a batch is cut into about four chunks per
    /// worker (each chunk's output buffer is its own locked allocation: fewer is cheaper, more
    /// balances better).
    var minChunkLines = 64
    /// Longest accepted line.
    var maxLineBytes = 1 << 20
    /// Drop a "\r" before each "\n" (opening); sealing keeps the line's bytes exactly.
    var dropCarriageReturn = true

    /// An error on a line, 1-based.
    struct LineError: Error {
        let line: Int
        let error: VaultError
    }

    /// Runs until end of input. Throws the first bad line's error.
    func run(input: Int32 = 0, output: Int32 = 1) throws(LineError) {
        var carry: SecureBytes? = nil   // a partial last line from the previous read
        var lineNumber = 0
        let writer = OrderedWriter(fd: output)
        // Whatever ends the stream, the batches before it are written first.
        do throws(LineError) {
            try stream(input: input, writer: writer, carry: &carry, lineNumber: &lineNumber)
        } catch {
            try writer.finish()
            throw error
        }
        try writer.finish()
    }

    private func stream(input: Int32, writer: OrderedWriter, carry: inout SecureBytes?, lineNumber: inout Int) throws(LineError) {
        while true {
            var eof = false
            var readError: VaultError?
            let capacity = (carry?.count ?? 0) + readSize
            let buffer = SecureBytes(capacity: capacity) { buf in
                var n = 0
                if let carry {
                    carry.withUnsafeBytes { if !$0.isEmpty { buf.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
                    n = carry.count
                }
                do throws(VaultError) {
                    let r = try StandardIO.readSome(fd: input, into: UnsafeMutableRawBufferPointer(rebasing: buf[n...]))
                    if r == 0 { eof = true }
                    n += r
                } catch { readError = error }
                return n
            }
            if let readError { throw LineError(line: lineNumber + 1, error: readError) }
            let (lines, rest) = buffer.withUnsafeBytes { Self.splitLines($0, final: eof, dropCR: dropCarriageReturn) }
            if let long = lines.first(where: { $0.count > maxLineBytes }) {
                throw LineError(line: lineNumber + 1 + lines.firstIndex(of: long)!, error: VaultError(.inputTooLarge, "a line is longer than \(maxLineBytes) bytes"))
            }
            if rest.count > maxLineBytes {
                throw LineError(line: lineNumber + 1, error: VaultError(.inputTooLarge, "a line is longer than \(maxLineBytes) bytes"))
            }
            carry = rest.count > 0 ? buffer.withUnsafeBytes { SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0[rest])) } : nil
            if !lines.isEmpty {
                try process(buffer, lines: lines, firstLine: lineNumber + 1, writer: writer)
                lineNumber += lines.count
            }
            if eof { return }
        }
    }

    /// Ranges of complete lines (newline and a CR before it dropped) and the range of the trailing partial line.
    static func splitLines(_ bytes: UnsafeRawBufferPointer, final: Bool, dropCR: Bool) -> ([Range<Int>], Range<Int>) {
        var lines: [Range<Int>] = []
        var start = 0
        var i = 0
        let n = bytes.count
        while i < n {
            if bytes[i] == 10 {
                var end = i
                if dropCR, end > start, bytes[end - 1] == 13 { end -= 1 }
                lines.append(start..<end)
                start = i + 1
            }
            i += 1
        }
        if final, start < n {
            var end = n
            if dropCR, bytes[end - 1] == 13 { end -= 1 }
            lines.append(start..<end)
            start = n
        }
        return (lines, start..<n)
    }

    private func process(_ buffer: SecureBytes, lines: [Range<Int>], firstLine: Int, writer: OrderedWriter) throws(LineError) {
        // Output that cannot be written (a closed pipe) stops the stream at the next batch.
        try writer.check()
        let chunkLines = max(minChunkLines, lines.count / (max(1, workers) * 4))
        let chunkCount = (lines.count + chunkLines - 1) / chunkLines
        let chunks: [Range<Int>] = (0..<chunkCount).map { c in
            (lines.count * c / chunkCount)..<(lines.count * (c + 1) / chunkCount)
        }
        let results = ResultBox(count: chunkCount)
        let transform = self.transform, maxOutput = self.maxOutput
        buffer.withUnsafeBytes { whole in
            let shared = SharedInput(bytes: whole)
            let next = ChunkCounter()
            let work: @Sendable (Int) -> Void = { _ in
                let input = shared.bytes
                while let c = next.take(below: chunkCount) {
                    let slice = chunks[c]
                    let bound = slice.reduce(0) { $0 + maxOutput(lines[$1].count) + 1 }
                    var failure: LineError?
                    let out = SecureBytes(capacity: bound) { out in
                        var at = 0
                        for index in slice {
                            let line = UnsafeRawBufferPointer(rebasing: input[lines[index]])
                            do throws(VaultError) {
                                at += try transform(line, UnsafeMutableRawBufferPointer(rebasing: out[at...]))
                            } catch {
                                failure = LineError(line: firstLine + index, error: error)
                                break
                            }
                            out[at] = 10
                            at += 1
                        }
                        return at
                    }
                    results.set(c, (out, failure))
                    // A bad line: chunks after it are not needed.
                    if failure != nil { next.stop(); return }
                }
            }
            let threads = max(1, min(workers, chunkCount))
            if threads == 1 { work(0) } else { DispatchQueue.concurrentPerform(iterations: threads, execute: work) }
        }
        // In order, up to and including the first chunk with a bad line (written up to that line).
        for c in 0..<chunkCount {
            guard let (out, failure) = results.get(c) else { break }
            writer.submit(out, firstLine: firstLine + chunks[c].lowerBound)
            if let failure { throw failure }
        }
    }
}

/// Hands out chunk numbers in order, once each, to the workers of a batch.
private final class ChunkCounter: @unchecked Sendable {
    private let mutex = PThreadMutex()
    private var next = 0
    private var stopped = false

    func take(below count: Int) -> Int? {
        mutex.withLock {
            guard !stopped, next < count else { return nil }
            defer { next += 1 }
            return next
        }
    }

    func stop() { mutex.withLock { stopped = true } }
}

/// Writes output buffers to a file descriptor in the order they are submitted, on its own thread,
/// so that transforming the next batch overlaps writing this one. The first write error is kept
/// and thrown by `finish` (later buffers are dropped).
private final class OrderedWriter: @unchecked Sendable {
    private let fd: Int32
    private let queue = DispatchQueue(label: "vault.lines.writer")
    private let mutex = PThreadMutex()
    private var failure: LinePipeline.LineError?
    /// Bounds what waits to be written: two batches' worth of chunks at most are in memory.
    private let pending = DispatchSemaphore(value: 64)

    init(fd: Int32) { self.fd = fd }

    func submit(_ bytes: SecureBytes, firstLine: Int) {
        pending.wait()
        queue.async { [self] in
            defer { pending.signal() }
            guard mutex.withLock({ failure == nil }) else { return }
            do throws(VaultError) {
                try bytes.withUnsafeBytes { (b) throws(VaultError) in try StandardIO.write(fd: fd, b) }
            } catch {
                mutex.withLock { failure = LinePipeline.LineError(line: firstLine, error: error) }
            }
        }
    }

    /// Throws the first write error so far, if any.
    func check() throws(LinePipeline.LineError) {
        if let failure = mutex.withLock({ failure }) { throw failure }
    }

    /// Waits for everything submitted to be written; throws the first write error.
    func finish() throws(LinePipeline.LineError) {
        queue.sync {}
        try check()
    }
}

/// The batch's input, read (never written) by every worker while `process` waits for them.
private struct SharedInput: @unchecked Sendable {
    let bytes: UnsafeRawBufferPointer
}

/// Per-chunk results of one batch; each slot is written by exactly one worker before the batch joins.
private final class ResultBox: @unchecked Sendable {
    typealias Slot = (SecureBytes, LinePipeline.LineError?)?
    private let slots: UnsafeMutablePointer<Slot>
    private let count: Int
    init(count: Int) {
        self.count = count
        slots = .allocate(capacity: count)
        slots.initialize(repeating: nil, count: count)
    }
    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
    }
    func set(_ i: Int, _ value: (SecureBytes, LinePipeline.LineError?)) { slots[i] = value }
    /// Nil for a chunk that was not transformed (after a bad line).
    func get(_ i: Int) -> (SecureBytes, LinePipeline.LineError?)? { slots[i] }
}

/// Runs a line pipeline, turning a bad line into its message (with the line number) and exit code.
func reportingErrors(_ pipeline: LinePipeline) throws(ExitCode) {
    do throws(LinePipeline.LineError) { try pipeline.run() } catch { throw fail(error.error, line: error.line) }
}
