import Foundation
import Testing

/// The suites that wait for processes run off Swift's shared pool (`OwnThread`), and no more of
/// them at once than `AsyncGate` lets in.
@Suite(.ownThread) struct OwnThreadTests {
    /// The kernel's name of the calling thread (a `Thread`'s name, cut to 15 bytes).
    static func threadName() -> String {
        (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
    }

    @Test func aSynchronousTestRunsOnItsOwnThread() {
        #expect(Self.threadName().hasPrefix("test "))
    }

    @Test func anAsyncTestComesBackToItsThreadAfterItsAwaits() async throws {
        #expect(Self.threadName().hasPrefix("test "))
        try await Task.sleep(for: .milliseconds(5))
        #expect(Self.threadName().hasPrefix("test "))
        async let child = Self.threadName()
        #expect(await child.hasPrefix("test "))
    }

    @Test func theGateLetsInAtMostItsWidth() async {
        let gate = AsyncGate(2)
        let inside = Locked(0), most = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    await gate.enter()
                    var now = 0
                    inside.update { $0 += 1; now = $0 }
                    most.update { $0 = max($0, now) }
                    try? await Task.sleep(for: .milliseconds(20))
                    inside.update { $0 -= 1 }
                    gate.leave()
                }
            }
        }
        #expect(most.value == 2)
        #expect(inside.value == 0)
    }
}
