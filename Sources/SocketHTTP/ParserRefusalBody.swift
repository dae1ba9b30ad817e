import Foundation
import Hummingbird
import NIOCore
import NIOHTTPTypes

/// Gives the coded body to the answer of a request NIO's HTTP parser refuses (malformed framing:
/// a bad request line, header or chunk size). Hummingbird answers those itself, before any route or
/// middleware, with a bare `400` (`Content-Length: 0`, `Connection: close`); this outbound handler,
/// between the HTTP codec and the server, rewrites exactly that answer into 400
/// `REQUEST_MALFORMED` with `{"error":{…}}` and a `Request-Id` (a fresh one: no request was read).
/// Every other answer passes untouched.
public final class ParserRefusalBodyHandler: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = HTTPResponsePart
    public typealias OutboundOut = HTTPResponsePart

    static let body = #"{"error":{"code":"REQUEST_MALFORMED","message":"the request's HTTP framing is malformed"}}"#
    private var pendingBody: ByteBuffer?

    public init() {}

    /// Hummingbird's own answer to an `HTTPParserError` (HTTPChannelHandler): nothing else the
    /// servers send is a 400 without a content type that closes the connection.
    static func isParserRefusal(_ head: HTTPResponse) -> Bool {
        head.status == .badRequest && head.headerFields[.contentLength] == "0" && head.headerFields[.connection] == "close"
            && head.headerFields[.contentType] == nil
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where Self.isParserRefusal(head):
            let body = ByteBuffer(string: Self.body)
            head.headerFields[.contentType] = "application/json"
            head.headerFields[.contentLength] = String(body.readableBytes)
            head.headerFields[.cacheControl] = "no-store"
            head.headerFields[.requestID] = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            pendingBody = body
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end(let trailers) where pendingBody != nil:
            if let body = pendingBody { context.write(wrapOutboundOut(.body(body)), promise: nil) }
            pendingBody = nil
            context.write(wrapOutboundOut(.end(trailers)), promise: promise)
        default:
            context.write(data, promise: promise)
        }
    }
}

/// Closes the connection after answering a `CONNECT` (no route takes one: 405 or 404). NIO frames
/// an answer to `CONNECT` without a body (a 2xx would start a tunnel) and its parser stops reading
/// the connection's later bytes, so a kept-alive connection would then wait for ever (outside
/// audit): marked `Connection: close`, the request ends its connection once answered.
public final class ConnectRefusalHandler: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPRequestPart
    public typealias InboundOut = HTTPRequestPart

    public init() {}

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(var head) = unwrapInboundIn(data), head.method == .connect {
            head.headerFields[.connection] = "close"
            context.fireChannelRead(wrapInboundOut(.head(head)))
            return
        }
        context.fireChannelRead(data)
    }
}
