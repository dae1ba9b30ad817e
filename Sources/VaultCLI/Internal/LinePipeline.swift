import ArgumentParser
import Dispatch
import ServerCLI
import VaultCrypto

/// Streams standard input line by line through a transform on all cores, keeping order.
///
/// Each `read(2)` gives whatever input is ready; its complete lines form a batch, split into one
/// contiguous slice per worker. Workers write into their own wiped output buffers; the batch is
/// then written out in input order, so output line N always answers input line N. The first bad
/// line stops the stream: everything before it is written, the error names its line number.
struct LinePipeline: Sendable {
    /// Turns one line (without its newline) into output bytes (without a newline); returns the length.
    typealias Transform = @Sendable (UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws(VaultError) -> Int

    /// An upper bound on a line's output length.
    let maxOutput: @Sendable (Int) -> Int
    let transform: Transform
    var workers = StandardIO.processorCount
    var readSize = 256 * 1024
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
                try process(buffer, lines: lines, firstLine: lineNumber + 1, output: output)
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

    private func process(_ buffer: SecureBytes, lines: [Range<Int>], firstLine: Int, output: Int32) throws(LineError) {
        let parts = max(1, min(workers, lines.count / 4 + 1))
        let slices: [Range<Int>] = (0..<parts).map { p in
            (lines.count * p / parts)..<(lines.count * (p + 1) / parts)
        }
        let results = ResultBox(count: parts)
        let transform = self.transform, maxOutput = self.maxOutput
        buffer.withUnsafeBytes { whole in
            let shared = SharedInput(bytes: whole)
            let work: @Sendable (Int) -> Void = { p in
                let input = shared.bytes
                let slice = slices[p]
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
                results.set(p, (out, failure))
            }
            if parts == 1 { work(0) } else { DispatchQueue.concurrentPerform(iterations: parts, execute: work) }
        }
        for p in 0..<parts {
            let (out, failure) = results.get(p)
            do throws(VaultError) {
                try out.withUnsafeBytes { (b) throws(VaultError) in try StandardIO.write(fd: output, b) }
            } catch {
                throw LineError(line: firstLine + slices[p].lowerBound, error: error)
            }
            if let failure { throw failure }
        }
    }
}

/// The batch's input, read (never written) by every worker while `process` waits for them.
private struct SharedInput: @unchecked Sendable {
    let bytes: UnsafeRawBufferPointer
}

/// Per-worker results of one batch; each slot is written by exactly one worker before the batch joins.
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
    func get(_ i: Int) -> (SecureBytes, LinePipeline.LineError?) { slots[i]! }
}

/// Runs a line pipeline, turning a bad line into its message (with the line number) and exit code.
func reportingErrors(_ pipeline: LinePipeline) throws(ExitCode) {
    do throws(LinePipeline.LineError) { try pipeline.run() } catch { throw fail(error.error, line: error.line) }
}
