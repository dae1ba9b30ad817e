/// A small RFC 4180 CSV reader for operator-supplied tables.
///
/// Fields are separated by commas and records by LF, CRLF or CR. A field may be quoted
/// (`"Bank, N.A."`, `""` for a quote, line breaks allowed inside); unquoted fields and the space
/// around quoted ones are trimmed of spaces and tabs. A UTF-8 byte order mark is skipped, blank
/// lines are ignored. Errors name the line and never quote the text.
enum CSVReader {
    /// One record: the line it starts on (1-based) and its fields.
    struct Record {
        let line: Int
        let fields: [String]
    }

    /// Calls `body` with each non-blank record, in order.
    static func forEachRecord(
        in text: String, _ body: (Record) throws(CardRulesError) -> Void
    ) throws(CardRulesError) {
        var text = text
        let result: Result<Void, CardRulesError> = text.withUTF8 { buffer in
            do throws(CardRulesError) {
                var reader = Cursor(bytes: buffer)
                while let record = try reader.next() { try body(record) }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// Reads records off a byte buffer.
    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var i = 0
        var line = 1

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { i = 3 }
        }

        static let comma = UInt8(ascii: ","), quote = UInt8(ascii: "\""), lf = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r")

        func isBlank(_ b: UInt8) -> Bool { b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") }

        /// The next non-blank record, nil at the end.
        mutating func next() throws(CardRulesError) -> Record? {
            while i < bytes.count {
                let start = line
                var fields: [String] = []
                var sawQuote = false
                while true {
                    let (field, quoted) = try readField()
                    fields.append(field)
                    sawQuote = sawQuote || quoted
                    if i < bytes.count && bytes[i] == Self.comma {
                        i += 1
                        continue
                    }
                    skipLineBreak()
                    break
                }
                if fields.count == 1 && fields[0].isEmpty && !sawQuote { continue }  // blank line
                return Record(line: start, fields: fields)
            }
            return nil
        }

        /// One field; leaves `i` on the comma, the line break or the end.
        private mutating func readField() throws(CardRulesError) -> (String, Bool) {
            while i < bytes.count && isBlank(bytes[i]) { i += 1 }
            guard i < bytes.count, bytes[i] == Self.quote else {
                let start = i
                while i < bytes.count, bytes[i] != Self.comma, bytes[i] != Self.lf, bytes[i] != Self.cr {
                    if bytes[i] == Self.quote { throw Self.error(line, "a quote inside an unquoted field") }
                    i += 1
                }
                var end = i
                while end > start && isBlank(bytes[end - 1]) { end -= 1 }
                return (String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self), false)
            }
            let opened = line
            i += 1
            var value: [UInt8] = []
            while true {
                guard i < bytes.count else { throw Self.error(opened, "a quoted field is not closed") }
                let b = bytes[i]
                if b == Self.quote {
                    if i + 1 < bytes.count && bytes[i + 1] == Self.quote {
                        value.append(Self.quote)
                        i += 2
                        continue
                    }
                    i += 1
                    break
                }
                if b == Self.lf || (b == Self.cr && !(i + 1 < bytes.count && bytes[i + 1] == Self.lf)) { line += 1 }
                value.append(b)
                i += 1
            }
            while i < bytes.count && isBlank(bytes[i]) { i += 1 }
            if i < bytes.count, bytes[i] != Self.comma, bytes[i] != Self.lf, bytes[i] != Self.cr {
                throw Self.error(line, "text after a closing quote")
            }
            return (String(decoding: value, as: UTF8.self), true)
        }

        /// Steps over one LF, CRLF or CR.
        private mutating func skipLineBreak() {
            guard i < bytes.count else { return }
            let wasCR = bytes[i] == Self.cr
            i += 1
            if wasCR && i < bytes.count && bytes[i] == Self.lf { i += 1 }
            line += 1
        }

        static func error(_ line: Int, _ what: String) -> CardRulesError {
            CardRulesError(code: .binTableInvalid, message: "BIN table line \(line): \(what)")
        }
    }
}
