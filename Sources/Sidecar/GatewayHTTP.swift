import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The HTTP/1.1 client of `GatewayClient`: one request at a time per connection to the gateway's
/// Unix socket, on SwiftNIO's event loops, with kept-alive connections reused.
///
/// It replaces the general HTTP client (AsyncHTTPClient) on this one path: issue 16's profile of a
/// payment found that client's URL handling, request bookkeeping and connection pool at about a
/// seventh of the sidecar's CPU per payment, for a peer that is always one local socket.
///
/// What it tells apart is what `GatewayClient.Failure` needs for the crash guarantees:
/// - `connect`: no connection was made (nothing was sent);
/// - `connectTimedOut`: connecting took longer than `connectTimeout` (nothing was sent);
/// - `notSent`: the connection was closed before a byte of the request was written (nothing was
///   sent; tried once more on a new connection first);
/// - `closedBeforeAnswer`: the connection closed after the request was given to it and before
///   the whole answer came (the gateway may have acted on it);
/// - `timedOut`: no whole answer within the call's timeout (the connection is closed);
/// - `tooLarge`: an answer over `maxAnswer` bytes (the connection is closed);
/// - `failed`: any other failure after the connection was made.
///
/// At most `maxConnections` calls hold a connection at once; the others wait for a free one.
/// A kept-alive connection that the gateway closes while idle leaves the pool as its close is
/// seen; one taken from the pool is checked to be open, and one found closed on its event loop
/// before the request's first byte is written is replaced once. A request is never sent twice: a
/// connection that closes once the request was given to it is `closedBeforeAnswer`, as the general
/// client reported it (`remoteConnectionClosed`).
final class GatewayHTTP: Sendable {
    enum Failure: Error {
        case connect(any Error)
        /// The connection was found closed before any byte of the request was written (nothing
        /// was sent); `call` then tries once more on a new connection.
        case notSent
        case connectTimedOut
        case closedBeforeAnswer
        case timedOut
        case tooLarge
        case failed(any Error)
    }

    /// At most this many connections are open at once (calls beyond wait for one to be free, as
    /// the general client's pool had them wait), and kept idle.
    static let maxConnections = 16
    /// The largest answer read (the gateway's answers are a few hundred bytes).
    static let maxAnswer = 64 * 1024

    let socketPath: String
    let connectTimeout: TimeAmount
    private let group: any EventLoopGroup
    private let idle = NIOLockedValueBox<[Connection]>([])
    /// Calls holding a connection, and the calls waiting for one.
    private let permits = NIOLockedValueBox<(inUse: Int, waiting: [CheckedContinuation<Void, Never>])>((0, []))

    init(socketPath: String, connectTimeout: TimeAmount = .seconds(2), group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.socketPath = socketPath
        self.connectTimeout = connectTimeout
        self.group = group
    }

    /// Idle connections kept now (tests).
    var idleCount: Int { idle.withLockedValue { $0.count } }

    /// Sends one request and reads its answer: the status and the body. `timeout` bounds the
    /// call from when it has a connection slot (`maxConnections`): connecting (at most
    /// `connectTimeout` of it), sending and the whole answer. A task's cancellation does not cut
    /// a call short: the answer to a request that may have charged is waited for.
    func call(_ method: HTTPMethod, _ path: String, body: String?, timeout: TimeAmount) async throws(Failure) -> (status: Int, body: ByteBuffer) {
        await acquire()
        defer { release() }
        let deadline = NIODeadline.now() + timeout
        do throws(Failure) {
            return try await attempt(method, path, body: body, deadline: deadline, fresh: false)
        } catch .notSent {
            // A kept connection closed as it was taken: nothing went out, a new one is made.
            return try await attempt(method, path, body: body, deadline: deadline, fresh: true)
        }
    }

    private func acquire() async {
        // A free slot is taken without suspending.
        let free = permits.withLockedValue { p -> Bool in
            guard p.inUse < Self.maxConnections else { return false }
            p.inUse += 1
            return true
        }
        if free { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = permits.withLockedValue { p -> Bool in
                if p.inUse < Self.maxConnections {
                    p.inUse += 1
                    return true
                }
                p.waiting.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    /// Hands the slot to the first call waiting, or frees it.
    private func release() {
        let next = permits.withLockedValue { p -> CheckedContinuation<Void, Never>? in
            if p.waiting.isEmpty {
                p.inUse -= 1
                return nil
            }
            return p.waiting.removeFirst()
        }
        next?.resume()
    }

    private func attempt(_ method: HTTPMethod, _ path: String, body: String?, deadline: NIODeadline, fresh: Bool) async throws(Failure) -> (status: Int, body: ByteBuffer) {
        let connection = try await take(fresh: fresh, deadline: deadline)
        let timeout = deadline - NIODeadline.now()
        // The time ran out connecting: nothing was written.
        guard timeout > .zero else {
            connection.channel.close(promise: nil)
            throw .connectTimedOut
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "gateway")
        var buffer: ByteBuffer?
        if let body {
            let b = connection.channel.allocator.buffer(string: body)
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: String(b.readableBytes))
            buffer = b
        } else if method == .POST || method == .PUT {
            headers.add(name: "Content-Length", value: "0")
        }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
        let answer: AnswerHandler.Answer
        do {
            answer = try await connection.handler.send(head, body: buffer, on: connection.channel, timeout: timeout).get()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .failed(error)
        }
        if answer.keepAlive, connection.channel.isActive, give(connection) {
            return (answer.status, answer.body)
        }
        connection.channel.close(promise: nil)
        return (answer.status, answer.body)
    }

    /// A connection and its answer handler.
    struct Connection: Sendable {
        let channel: any Channel
        let handler: AnswerHandler
    }

    /// An idle connection that is still open (unless `fresh`), or a new one, connected before
    /// `deadline` and within `connectTimeout`.
    private func take(fresh: Bool, deadline: NIODeadline) async throws(Failure) -> Connection {
        while !fresh, let kept = idle.withLockedValue({ $0.popLast() }) {
            if kept.channel.isActive { return kept }
            kept.channel.close(promise: nil)
        }
        let left = deadline - NIODeadline.now()
        guard left > .zero else { throw .connectTimedOut }
        let handler = AnswerHandler(maxAnswer: Self.maxAnswer)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(min(connectTimeout, left))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(unixDomainSocketPath: socketPath).get()
        } catch ChannelError.connectTimeout {
            throw .connectTimedOut
        } catch {
            throw .connect(error)
        }
        let connection = Connection(channel: channel, handler: handler)
        // An idle connection the gateway closes leaves the pool as soon as its close is seen.
        channel.closeFuture.whenComplete { [weak self] _ in
            self?.idle.withLockedValue { $0.removeAll { $0.channel === channel } }
        }
        return connection
    }

    /// Keeps an answered connection for the next call; false when the pool is full.
    private func give(_ connection: Connection) -> Bool {
        idle.withLockedValue { pool in
            guard pool.count < Self.maxConnections, connection.channel.isActive else { return false }
            pool.append(connection)
            return true
        }
    }
}

/// Reads the answer to the one request in flight on its connection. Its state is only touched
/// on the connection's event loop (`send` hops there).
final class AnswerHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    struct Answer: Sendable {
        var status: Int
        var body: ByteBuffer
        var keepAlive: Bool
    }

    private let maxAnswer: Int
    private var pending: EventLoopPromise<Answer>?
    private var timer: Scheduled<Void>?
    private var answer: Answer?
    private var context: ChannelHandlerContext?

    init(maxAnswer: Int) { self.maxAnswer = maxAnswer }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Writes the request and answers its response; fails with `GatewayHTTP.Failure`.
    func send(_ head: HTTPRequestHead, body: ByteBuffer?, on channel: any Channel, timeout: TimeAmount) -> EventLoopFuture<Answer> {
        let loop = channel.eventLoop
        let promise = loop.makePromise(of: Answer.self)
        loop.execute { [self] in
            guard let context, channel.isActive, pending == nil else {
                promise.fail(GatewayHTTP.Failure.notSent)
                return
            }
            pending = promise
            answer = nil
            timer = loop.scheduleTask(in: timeout) { [self] in
                fail(.timedOut)
                channel.close(promise: nil)
            }
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            if let body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
            let written = loop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
            written.futureResult.whenFailure { [self] _ in
                // This request's own failure only (the connection is not reused after it).
                guard pending?.futureResult === promise.futureResult else { return }
                fail(.closedBeforeAnswer)
                channel.close(promise: nil)
            }
        }
        return promise.futureResult
    }

    /// The request in flight, taken off: its answer state and timer cleared.
    private func finish() -> EventLoopPromise<Answer>? {
        let p = pending
        pending = nil
        answer = nil
        timer?.cancel()
        timer = nil
        return p
    }

    private func fail(_ failure: GatewayHTTP.Failure) { finish()?.fail(failure) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            guard pending != nil else { return }
            answer = Answer(status: Int(head.status.code), body: context.channel.allocator.buffer(capacity: 512), keepAlive: head.isKeepAlive)
        case .body(var part):
            guard pending != nil, answer != nil else { return }
            if answer!.body.readableBytes + part.readableBytes > maxAnswer {
                fail(.tooLarge)
                context.close(promise: nil)
                return
            }
            answer!.body.writeBuffer(&part)
        case .end:
            guard pending != nil, let a = answer else { return }
            finish()?.succeed(a)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(.closedBeforeAnswer)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(.failed(error))
        context.close(promise: nil)
    }
}
