#if canImport(Glibc)
import Glibc
#endif
import Logging
import SocketHTTP
import Testing

/// How many event loops a sidecar starts (`SocketServer.chooseEventLoops`): one fewer than the
/// cores (the store's writer, the gateway's calls and a small box's gateway run on the one left),
/// at least one, or `VAULT_EVENT_LOOPS` when it is a whole number from 1 to 64 (any other value
/// is refused).
struct EventLoopCountTests {
    @Test func oneFewerThanTheCoresAtLeastOne() {
        #expect(SocketServer.eventLoopCount(environment: [:], cores: 1) == 1)
        #expect(SocketServer.eventLoopCount(environment: [:], cores: 2) == 1)
        #expect(SocketServer.eventLoopCount(environment: [:], cores: 8) == 7)
    }

    @Test func theEnvironmentChoosesFromOneTo64() {
        #expect(SocketServer.eventLoopCount(environment: ["VAULT_EVENT_LOOPS": "2"], cores: 2) == 2)
        #expect(SocketServer.eventLoopCount(environment: ["VAULT_EVENT_LOOPS": "64"], cores: 2) == 64)
        #expect(SocketServer.eventLoopSettingProblem(environment: ["VAULT_EVENT_LOOPS": "64"]) == nil)
        #expect(SocketServer.eventLoopSettingProblem(environment: [:]) == nil)
        // Empty is unset.
        #expect(SocketServer.eventLoopSettingProblem(environment: ["VAULT_EVENT_LOOPS": ""]) == nil)
        #expect(SocketServer.eventLoopCount(environment: ["VAULT_EVENT_LOOPS": ""], cores: 4) == 3)
    }

    /// Any other value is refused (the sidecar stops with CONFIG_INVALID: LogCLITests), and the
    /// message does not repeat it.
    @Test func anotherValueIsRefused() {
        for refused in ["0", "65", "-1", "two", " 2", "2 ", "1e1"] {
            let problem = SocketServer.eventLoopSettingProblem(environment: ["VAULT_EVENT_LOOPS": refused])
            #expect(problem == "VAULT_EVENT_LOOPS must be a whole number from 1 to 64", "\(refused)")
        }
    }
}

/// A server raises its open-file limit to the hard one (`SocketServer.raisedOpenFileLimit`): each
/// connection holds a descriptor, and systemd's soft limit of 1,024 would let a thousand idle
/// local connections stop the server from accepting.
struct OpenFileLimitTests {
    @Test func theSoftLimitIsRaisedToTheHardOne() {
        let raised = SocketServer.raisedOpenFileLimit(rlimit(rlim_cur: 1024, rlim_max: 524_288))
        #expect(raised?.rlim_cur == 524_288 && raised?.rlim_max == 524_288)
        #expect(SocketServer.raisedOpenFileLimit(rlimit(rlim_cur: 4096, rlim_max: 4096)) == nil)
    }

    /// In this process: afterwards the soft limit is the hard one.
    @Test func aServerRunsAtItsHardLimit() {
        SocketServer.raiseOpenFileLimit(logger: Logger(label: "test"))
        var now = rlimit()
        #expect(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &now) == 0)
        #expect(now.rlim_cur == now.rlim_max)
    }
}
