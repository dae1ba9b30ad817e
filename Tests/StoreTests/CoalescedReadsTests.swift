import Foundation
@testable import Store
import Testing

/// `CoalescedReads` with a scripted statement (no database): a read that arrives while a statement
/// is on the wire is answered by the next statement, never by the one already running (it is never
/// older than a read of its own); a failed statement fails its batch only; the counter cap splits
/// batches; a cancelled leader does not fail the reads of its batch.
@Suite struct CoalescedReadsTests {
    typealias Counter = VelocityCounters.Counter

    /// A table of counts read the way a statement reads: at its start. The statements numbered in
    /// `hold` (the first, by default) wait at a gate until `open(n)`; `failNext` fails the next
    /// statement to start.
    final class Table: @unchecked Sendable {
        private let lock = NSLock()
        private var counts: [Counter: Int] = [:]
        private var gates: [Int: CheckedContinuation<Void, Never>] = [:]
        private var held: Set<Int> = [], opened: Set<Int> = []
        private var _statements: [[Counter: Int64]] = []
        let hold: Set<Int>
        var failNext = false

        init(hold: Set<Int> = [1]) { self.hold = hold }

        var statements: [[Counter: Int64]] { lock.withLock { _statements } }
        var isHolding: Bool { isHolding(1) }
        func isHolding(_ n: Int) -> Bool { lock.withLock { held.contains(n) } }

        func set(_ c: Counter, _ n: Int) { lock.withLock { counts[c] = n } }

        func open(_ n: Int = 1) {
            let g = lock.withLock { () -> CheckedContinuation<Void, Never>? in
                opened.insert(n)
                return gates.removeValue(forKey: n)
            }
            g?.resume()
        }

        func run(_ since: [Counter: Int64]) async throws(StoreError) -> CoalescedReads.Buckets {
            let (snapshot, number, fail) = lock.withLock { () -> ([Counter: Int], Int, Bool) in
                _statements.append(since)
                defer { failNext = false }
                return (counts, _statements.count, failNext)
            }
            if hold.contains(number) {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let resumeNow = lock.withLock { () -> Bool in
                        held.insert(number)
                        if opened.contains(number) { return true }
                        gates[number] = c
                        return false
                    }
                    if resumeNow { c.resume() }
                }
            }
            if fail { throw StoreError(.unavailable, "scripted failure") }
            var out: CoalescedReads.Buckets = [:]
            for c in since.keys { if let n = snapshot[c] { out[c] = [(bucket: 600, count: n)] } }
            return out
        }
    }

    static func counter(_ key: String) -> Counter { Counter(scope: "bin", key: key, action: "pay", kind: "declines", width: 60) }

    @Test func aReadThatArrivesDuringAStatementGetsTheNextOne() async throws {
        let table = Table()
        table.set(Self.counter("411111"), 1)
        let reads = CoalescedReads { (since) throws(StoreError) in try await table.run(since) }
        let a = Task { try await reads.read([Self.counter("411111"): 0]) }
        while !table.isHolding { try await Task.sleep(for: .milliseconds(2)) }
        // A decline is counted while A's statement is on the wire; B starts after it.
        table.set(Self.counter("411111"), 2)
        let b = Task { try await reads.read([Self.counter("411111"): 0]) }
        let c = Task { try await reads.read([Self.counter("422222"): 0]) }
        for _ in 0..<500 where reads.queued < 2 { try await Task.sleep(for: .milliseconds(2)) }
        #expect(reads.queued == 2)
        table.open()
        #expect(try await a.value[Self.counter("411111")]?.first?.count == 1)
        #expect(try await b.value[Self.counter("411111")]?.first?.count == 2, "a read was answered by a statement older than itself")
        #expect(try await c.value.isEmpty)
        // A's statement, then B's and C's together.
        #expect(table.statements.map(\.count) == [1, 2])
        #expect(reads.statements == 2)
    }

    @Test func aFailedStatementFailsItsBatchOnlyAndTheNextReadsRun() async throws {
        let table = Table()
        table.set(Self.counter("411111"), 5)
        let reads = CoalescedReads { (since) throws(StoreError) in try await table.run(since) }
        let a = Task { try await reads.read([Self.counter("411111"): 0]) }
        while !table.isHolding { try await Task.sleep(for: .milliseconds(2)) }
        let b = Task { try await reads.read([Self.counter("411111"): 0]) }
        for _ in 0..<500 where reads.queued < 1 { try await Task.sleep(for: .milliseconds(2)) }
        table.failNext = true   // A's statement has started: B's fails
        table.open()
        #expect(try await a.value[Self.counter("411111")]?.first?.count == 5)
        await #expect(throws: StoreError.self) { try await b.value }
        // Nothing is left stuck: the next read runs.
        #expect(try await reads.read([Self.counter("411111"): 0])[Self.counter("411111")]?.first?.count == 5)
        #expect(reads.statements == 3)
    }

    @Test func batchesStopAtTheCounterCapButAReadWithMoreGoesAlone() async throws {
        let table = Table()
        let reads = CoalescedReads { (since) throws(StoreError) in try await table.run(since) }
        let many = Dictionary(uniqueKeysWithValues: (0..<25).map { (Self.counter("4\($0)"), Int64(0)) })
        let a = Task { try await reads.read([Self.counter("first"): 0]) }
        while !table.isHolding { try await Task.sleep(for: .milliseconds(2)) }
        // Queued behind A: 25 counters (alone, over the cap), then 15 + 10 (split at 21).
        let b = Task { try await reads.read(many) }
        for _ in 0..<500 where reads.queued < 1 { try await Task.sleep(for: .milliseconds(2)) }
        let c = Task { try await reads.read(Dictionary(uniqueKeysWithValues: (0..<15).map { (Self.counter("5\($0)"), Int64(0)) })) }
        for _ in 0..<500 where reads.queued < 2 { try await Task.sleep(for: .milliseconds(2)) }
        let d = Task { try await reads.read(Dictionary(uniqueKeysWithValues: (0..<10).map { (Self.counter("6\($0)"), Int64(0)) })) }
        for _ in 0..<500 where reads.queued < 3 { try await Task.sleep(for: .milliseconds(2)) }
        table.open()
        for t in [a, b, c, d] { _ = try await t.value }
        #expect(table.statements.map(\.count) == [1, 25, 15, 10])
    }

    @Test func aCancelledLeaderDoesNotFailItsBatch() async throws {
        // Statement 1 (X alone) is held while L and B queue; statement 2 (L leading, B with it) is
        // held while L is cancelled.
        let table = Table(hold: [1, 2])
        table.set(Self.counter("411111"), 3)
        let reads = CoalescedReads { (since) throws(StoreError) in
            // A statement that fails when its task is cancelled, as a PostgreSQL lease does.
            let answer = try await table.run(since)
            if Task.isCancelled { throw StoreError(.unavailable, "cancelled") }
            return answer
        }
        let x = Task { try await reads.read([Self.counter("400000"): 0]) }
        while !table.isHolding(1) { try await Task.sleep(for: .milliseconds(2)) }
        let l = Task { try await reads.read([Self.counter("411111"): 0]) }
        for _ in 0..<500 where reads.queued < 1 { try await Task.sleep(for: .milliseconds(2)) }
        let b = Task { try await reads.read([Self.counter("411111"): 0]) }
        for _ in 0..<500 where reads.queued < 2 { try await Task.sleep(for: .milliseconds(2)) }
        table.open(1)
        _ = try await x.value
        while !table.isHolding(2) { try await Task.sleep(for: .milliseconds(2)) }
        l.cancel()
        table.open(2)
        _ = try? await l.value
        #expect(try await b.value[Self.counter("411111")]?.first?.count == 3, "the leader's cancellation failed a read of its batch")
        #expect(table.statements.map(\.count) == [1, 1])
    }
}
