import Foundation

/// Batches of concurrent calls, with no task of their own: the first caller to find no batch
/// running leads. It runs a batch (its own item first, with the items queued behind it, as many as
/// `take` says), answers the others, and hands the lead to the first item still queued, which runs
/// the next batch. A lone call goes at once (no timer); a leader waits for one batch only. The
/// tokens' group commit (`GroupCommit`) and the velocity reads (`CoalescedReads`) use it.
///
/// `run` runs in a task of its own: a leading call whose task is cancelled (a request whose
/// client went away) does not fail the other items of its batch (on PostgreSQL a cancelled task's
/// connection lease fails).
public final class LeaderBatches<Item: Sendable, Answer: Sendable>: @unchecked Sendable {
    public typealias Run = @Sendable ([Item]) async -> [Answer]
    enum Turn { case done(Answer), lead }
    typealias Waiter = CheckedContinuation<Turn, Never>

    private let take: @Sendable ([Item]) -> Int
    private let run: Run
    private let lock = NSLock()
    /// Items waiting, in arrival order; while `running`, the first one leads the next batch.
    private var queue: [(item: Item, waiter: Waiter)] = []
    private var running = false
    private var ran = 0

    /// `take`: how many of the queued items (in order, the leader's first) the next batch takes,
    /// clamped to at least one. `run`: the batch's answers, one per item, in order.
    public init(take: @escaping @Sendable ([Item]) -> Int, run: @escaping Run) {
        self.take = take
        self.run = run
    }

    /// Items waiting for a batch (tests).
    public var queued: Int { lock.withLock { queue.count } }
    /// Batches run so far (tests).
    public var batches: Int { lock.withLock { ran } }

    /// Queues `item`; its answer once the batch holding it has run.
    public func submit(_ item: Item) async -> Answer {
        let turn = await withCheckedContinuation { (waiter: Waiter) in
            lock.lock()
            queue.append((item, waiter))
            let lead = !running
            running = true
            lock.unlock()
            if lead { waiter.resume(returning: .lead) }
        }
        switch turn {
        case .done(let answer): return answer
        case .lead: return await runBatch()
        }
    }

    /// Runs the batch at the head of the queue (the caller's item first), answers its other
    /// items, passes the lead on, and returns the caller's own answer.
    private func runBatch() async -> Answer {
        let batch = lock.withLock {
            let n = min(max(1, take(queue.map { $0.item })), queue.count)
            ran += 1
            defer { queue.removeFirst(n) }
            return Array(queue.prefix(n))
        }
        let run = self.run
        let items = batch.map { $0.item }
        let answers = await Task { await run(items) }.value
        precondition(answers.count == batch.count, "a batch answers each of its items")
        // The first waiter is the caller's own, already resumed (with the lead).
        for (entry, answer) in zip(batch, answers).dropFirst() { entry.waiter.resume(returning: .done(answer)) }
        let next = lock.withLock {
            let first = queue.first?.waiter
            if first == nil { running = false }
            return first
        }
        next?.resume(returning: .lead)
        return answers[0]
    }
}
