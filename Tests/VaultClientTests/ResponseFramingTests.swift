import Testing
@testable import VaultClient

/// How the client finds the end of an answer from its head (`HTTPResponseParser.framing`).
struct ResponseFramingTests {
    static func framing(_ head: String) -> HTTPResponseParser.Framing? {
        HTTPResponseParser.framing(Array((head + "\r\n\r\n").utf8))
    }

    @Test func contentLengthWithAnySpacingAndCase() {
        #expect(Self.framing("HTTP/1.1 200 OK\r\nContent-Length: 12")?.contentLength == 12)
        #expect(Self.framing("HTTP/1.1 201 Created\r\ncontent-length:7")?.contentLength == 7)
        #expect(Self.framing("HTTP/1.1 200 OK\r\nCONTENT-LENGTH: \t 345 \t")?.contentLength == 345)
        #expect(Self.framing("HTTP/1.1 200 OK\r\nContent-Length: 0")?.contentLength == 0)
        #expect(Self.framing("HTTP/1.1 200 OK\r\nContent-Length: 12")?.bodyStart == "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n".utf8.count)
    }

    @Test func noUsableLengthReadsToTheClose() {
        for head in ["HTTP/1.1 200 OK\r\nContent-Length: 1x", "HTTP/1.1 200 OK\r\nContent-Length: -", "HTTP/1.1 200 OK\r\nContent-Length:", "HTTP/1.1 200 OK"] {
            let f = Self.framing(head)
            #expect(f?.contentLength == nil, "\(head)")
            #expect(f?.toClose == true && f?.keepAlive == false, "\(head)")
        }
    }

    @Test func chunkedBodylessAndClose() {
        let chunked = Self.framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 10")
        #expect(chunked?.chunked == true && chunked?.contentLength == nil && chunked?.keepAlive == true)
        #expect(Self.framing("HTTP/1.1 204 No Content\r\nContent-Length: 10")?.contentLength == 0)
        #expect(Self.framing("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close")?.keepAlive == false)
        #expect(HTTPResponseParser.framing(Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n".utf8)) == nil)
    }
}
