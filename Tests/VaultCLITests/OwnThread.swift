import Foundation
import Testing

/// Runs each test of a suite on a thread of its own instead of Swift's shared pool.
///
/// These tests block: they wait for child processes (`run`), sleep between polls and read pipes.
/// Swift Testing runs a test function, even a synchronous one, on the cooperative pool, which has
/// one thread per core (two on CI). Two such tests at once held the whole pool, and every other
/// test in the process (the store and route suites, with their own time-outs) stood still until
/// they ended: stalls of 50–130 s in a full run. With this trait, a test's code, and the async code
/// it awaits that has no executor of its own, runs on its own thread. As many of these tests run at
/// once as before (`gate`: one per core, at least two), each with its servers and child processes;
/// run all at once, they starve each other past their time-outs.
struct OwnThread: SuiteTrait, TestTrait, TestScoping {
    static let gate = AsyncGate(max(2, ProcessInfo.processInfo.activeProcessorCount))

    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        guard testCase != nil else { return try await function() }
        await Self.gate.enter()
        defer { Self.gate.leave() }
        let executor = ThreadExecutor(name: "test \(test.name)")
        defer { executor.finish() }
        try await withTaskExecutorPreference(executor) { try await function() }
    }
}

/// At most `width` holders at once; the others wait (suspended, holding no thread) in arrival order.
final class AsyncGate: @unchecked Sendable {
    // @unchecked: `free` and `waiting` are used under `lock` only.
    private let lock = NSLock()
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ width: Int) { free = width }

    func enter() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if free > 0 {
                    free -= 1
                    return true
                }
                waiting.append(waiter)
                return false
            }
            if now { waiter.resume() }
        }
    }

    func leave() {
        let next = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            if waiting.isEmpty {
                free += 1
                return nil
            }
            return waiting.removeFirst()
        }
        next?.resume()
    }
}

extension Trait where Self == OwnThread {
    /// Each test on a thread of its own (`OwnThread`).
    static var ownThread: Self { OwnThread() }
}

/// A task executor with one thread, which runs the jobs given to it in order. Jobs that come after
/// `finish` (a task the test left running) go to the global executor.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` and `finished` are used under `condition`'s lock only.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    init(name: String) {
        // Named from the thread itself: `Thread.name` does not reach the kernel on Linux.
        let name = String(name.utf8.prefix(15)) ?? "test"
        Thread { [self] in
            try? name.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
            work()
        }.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let taken = condition.withLock { () -> Bool in
            guard !finished else { return false }
            jobs.append(job)
            condition.signal()
            return true
        }
        if !taken { globalConcurrentExecutor.enqueue(job) }
    }

    /// Ends the thread once the jobs queued have run.
    func finish() {
        condition.withLock {
            finished = true
            condition.signal()
        }
    }

    private func work() {
        var taken: [UnownedJob] = []
        while true {
            condition.lock()
            while jobs.isEmpty, !finished { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            swap(&taken, &jobs)
            condition.unlock()
            for job in taken { job.runSynchronously(on: asUnownedTaskExecutor()) }
            taken.removeAll(keepingCapacity: true)
        }
    }
}
