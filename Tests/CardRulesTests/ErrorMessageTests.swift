import CardRules
import Foundation
import Testing

/// No error message, description or metadata carries the card digits it was given.
@Suite struct ErrorMessageTests {
    static let numbers = ["4242424242424242", "378282246310005", "5555555555554444", "6011111111111117", "36227206271667"]

    /// Whether `text` holds 5 or more consecutive digits of `number` (a BIN of 6 is the least
    /// anything safe shows, and no error shows even that).
    func leaks(_ text: String, _ number: String) -> Bool {
        let digits = Array(number)
        for start in 0...(digits.count - 5) where text.contains(String(digits[start..<(start + 5)])) { return true }
        return false
    }

    func normalizerError(_ input: String) -> CardRulesError? {
        let bytes = ascii(input)
        var out = [UInt8](repeating: 0, count: 64)
        return bytes.withUnsafeBytes { raw in
            out.withUnsafeMutableBytes { o in
                do throws(CardRulesError) {
                    _ = try PANNormalizer.normalize(raw, into: o)
                    return nil
                } catch {
                    return error
                }
            }
        }
    }

    @Test(arguments: numbers)
    func normalizerErrorsHoldNoDigits(number: String) throws {
        let inputs = [number + "x", "x" + number, number + number, number + "\0", number + "é", number.prefix(8) + "." + number.dropFirst(8)]
        for input in inputs {
            let error = try #require(normalizerError(input), "\(input)")
            #expect(!leaks(error.message, number))
            #expect(!leaks(error.description, number))
            #expect(!leaks("\(error)", number))
            #expect(!leaks(String(reflecting: error), number))
        }
    }

    @Test(arguments: numbers)
    func expiryAndBINTableErrorsHoldNoInput(number: String) {
        for text in [number, "12/" + number, number + "/30", String(number.prefix(2)) + "/" + number] {
            do throws(CardRulesError) {
                _ = try CardExpiry.parse(text)
                Issue.record("parsed \(text)")
            } catch {
                #expect(!leaks(error.description, number))
            }
        }
        let rows = ["\(number.prefix(6)),\(number.prefix(7)),visa,,,", "\(number),\(number),visa,,,", "\(number.prefix(6)),\(number.prefix(6)),\"\(number)"]
        for csv in rows {
            do throws(CardRulesError) {
                _ = try BINTable(csv: csv)
                Issue.record("accepted \(csv)")
            } catch {
                #expect(error.code == .binTableInvalid)
                #expect(!leaks(error.description, number))
                #expect(!error.message.contains(String(number.prefix(6))))
            }
        }
    }

    @Test(arguments: numbers)
    func invalidNumbersLeaveOnlySafeMetadata(number: String) throws {
        var bad = ascii(number)
        bad[bad.count - 1] = bad[bad.count - 1] == UInt8(ascii: "9") ? UInt8(ascii: "0") : bad[bad.count - 1] + 1
        for digits in [ascii(number), bad, ascii(number) + [UInt8(ascii: "1")]] {
            let info = CardValidator().validate(digits: digits)
            let json = String(decoding: try JSONEncoder().encode(info), as: UTF8.self)
            let full = String(decoding: digits, as: UTF8.self)
            #expect(!json.contains(full))
            #expect(!String(describing: info).contains(full))
            #expect(CardFormatter.mask(digits, brand: info.brand).filter(\.isNumber).count <= 12)
            #expect((info.bin?.count ?? 0) + (info.last4?.count ?? 0) <= 12)
        }
    }

    @Test func everyCodeIsStableUpperSnake() {
        let codes: [CardRulesError.Code] = [
            .nonDigit, .empty, .tooShort, .tooLong, .unknownBrand, .invalidLength, .luhnFailed, .brandNotAccepted,
            .expiryMalformed, .invalidMonth, .expired, .expiryTooFar, .cvcMalformed, .cvcLength, .binTableInvalid,
        ]
        #expect(codes.map(\.rawValue) == [
            "NON_DIGIT_CHARACTERS", "CARD_NUMBER_EMPTY", "CARD_NUMBER_TOO_SHORT", "CARD_NUMBER_TOO_LONG", "UNKNOWN_CARD_BRAND",
            "INVALID_CARD_LENGTH", "LUHN_CHECK_FAILED", "BRAND_NOT_ACCEPTED", "EXPIRY_MALFORMED", "INVALID_EXPIRY_MONTH",
            "CARD_EXPIRED", "EXPIRY_TOO_FAR", "CVC_MALFORMED", "INVALID_CVC_LENGTH", "BIN_TABLE_INVALID",
        ])
        #expect(Set(codes).count == codes.count)
        for code in codes {
            #expect(code.rawValue.allSatisfy { $0.isUppercase || $0 == "_" })
            #expect(code.description == code.rawValue)
        }
        let e = CardRulesError(code: .luhnFailed, message: "the check digit is wrong")
        #expect(e.description == "LUHN_CHECK_FAILED: the check digit is wrong")
    }
}
