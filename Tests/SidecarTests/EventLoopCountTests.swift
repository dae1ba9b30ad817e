import SocketHTTP
import Testing

/// How many event loops a sidecar starts (`SocketServer.chooseEventLoops`): one fewer than the
/// cores (the store's writer, the gateway's calls and a small box's gateway run on the one left),
/// at least one, or `VAULT_EVENT_LOOPS` when it is a whole number from 1 to 64.
struct EventLoopCountTests {
    @Test func oneFewerThanTheCoresAtLeastOne() {
        #expect(SocketServer.eventLoopCount(environment: [:], cores: 1) == 1)
        #expect(SocketServer.eventLoopCount(environment: [:], cores: 2) == 1)
        #expect(SocketServer.eventLoopCount(environment: [:], cores: 8) == 7)
    }

    @Test func theEnvironmentChoosesFromOneTo64() {
        #expect(SocketServer.eventLoopCount(environment: ["VAULT_EVENT_LOOPS": "2"], cores: 2) == 2)
        #expect(SocketServer.eventLoopCount(environment: ["VAULT_EVENT_LOOPS": "64"], cores: 2) == 64)
        for ignored in ["0", "65", "-1", "two", "", " 2"] {
            #expect(SocketServer.eventLoopCount(environment: ["VAULT_EVENT_LOOPS": ignored], cores: 4) == 3, "\(ignored)")
        }
    }
}
