import CardRules
import Foundation
import Testing

@Suite struct CardValidatorTests {
    let validator = CardValidator()

    func errors(_ s: String, _ v: CardValidator = CardValidator(), partial: Bool = false) -> [CardRulesError.Code] {
        v.validate(digits: ascii(s), partial: partial).errors
    }

    @Test func completeNumbers() {
        #expect(errors("4242424242424242") == [])
        #expect(errors("4242424242424241") == [.luhnFailed])
        #expect(errors("424242424242424") == [.invalidLength])  // 15-digit visa
        #expect(errors("42424242424242424") == [.invalidLength])  // 17
        #expect(errors("4242") == [.tooShort])
        #expect(errors("6") == [.tooShort])  // no range matches yet, but one could
        #expect(errors("9") == [.unknownBrand])
        #expect(errors("9999999999999995") == [.unknownBrand])
        #expect(errors("2205000000000003") == [.unknownBrand])
        #expect(errors("") == [.empty])
        #expect(errors("42424242424242424242") == [.tooLong])
        #expect(errors("42424242x2424242") == [.nonDigit])
        #expect(errors("55555555555544445") == [.invalidLength])  // mastercard is 16 only
        #expect(errors("378282246310005") == [])
        #expect(errors("3782822463100050") == [.invalidLength])
    }

    @Test func lengthsFollowTheMatchedRange() {
        #expect(errors("180000000000002") == [])  // JCB 1800 is 15 digits
        #expect(errors("213112345678904") == [])
        #expect(errors(String(decoding: luhnNumber("1800", length: 16), as: UTF8.self)) == [.invalidLength])
        #expect(errors(String(decoding: luhnNumber("3528", length: 15), as: UTF8.self)) == [.tooShort])  // below 16
        #expect(errors(String(decoding: luhnNumber("3528", length: 19), as: UTF8.self)) == [])
        #expect(errors(String(decoding: luhnNumber("36", length: 14), as: UTF8.self)) == [])
        #expect(errors(String(decoding: luhnNumber("67", length: 12), as: UTF8.self)) == [])  // maestro 12
        #expect(errors(String(decoding: luhnNumber("5078650", length: 18), as: UTF8.self)) == [])  // verve 18
        #expect(errors(String(decoding: luhnNumber("5078650", length: 17), as: UTF8.self)) == [.invalidLength])
    }

    @Test func unionPayNeedsNoLuhn() {
        let info = validator.validate(digits: ascii("6200000000000001"))
        #expect(info.brand == .unionpay)
        #expect(!info.luhn)
        #expect(info.valid)
        // Discover's co-brand range inside 62 does check it.
        #expect(errors("6221260000000001") == [.luhnFailed])
    }

    @Test func acceptedBrands() {
        let visaOnly = CardValidator(acceptedBrands: [.visa])
        #expect(errors("5555555555554444", visaOnly) == [.brandNotAccepted])
        #expect(errors("5555555555554445", visaOnly) == [.brandNotAccepted, .luhnFailed])
        #expect(errors("4242424242424242", visaOnly) == [])
        #expect(errors("5555555555554444", CardValidator(acceptedBrands: [.visa, .mastercard])) == [])
        #expect(errors("4011780000000006", visaOnly) == [.brandNotAccepted])  // elo, inside visa's 4
        #expect(visaOnly.accepts(.visa) && !visaOnly.accepts(.elo) && CardValidator().accepts(.elo))

        // Partial: only when every possible brand is refused.
        #expect(errors("5", visaOnly, partial: true) == [.brandNotAccepted])
        #expect(errors("4", visaOnly, partial: true) == [])
        #expect(errors("4", CardValidator(acceptedBrands: [.mastercard]), partial: true) == [.brandNotAccepted])
        #expect(errors("4", CardValidator(acceptedBrands: [.maestro]), partial: true) == [])  // 493698
        #expect(errors("4011", CardValidator(acceptedBrands: [.elo]), partial: true) == [])
        #expect(errors("401178", CardValidator(acceptedBrands: [.visa]), partial: true) == [.brandNotAccepted])
        #expect(errors("", CardValidator(acceptedBrands: []), partial: true) == [])
        #expect(errors("4", CardValidator(acceptedBrands: []), partial: true) == [.brandNotAccepted])
    }

    @Test func partialNumbersOnlyReportWhatTypingCannotFix() {
        #expect(errors("", partial: true) == [])
        #expect(errors("4", partial: true) == [])
        #expect(errors("4242", partial: true) == [])
        #expect(errors("424242424242424", partial: true) == [])  // may become 16
        #expect(errors("4242424242424241", partial: true) == [])  // visa may reach 18 or 19
        #expect(errors("9", partial: true) == [.unknownBrand])
        #expect(errors("2205", partial: true) == [.unknownBrand])
        #expect(errors("4242x", partial: true) == [.nonDigit])
        #expect(errors("42424242424242424242", partial: true) == [.tooLong])
        #expect(errors("37828224631000511", partial: true) == [.invalidLength])  // amex is 15
        #expect(errors("5555555555554444", partial: true) == [])
        // At the brand's last length, the complete check's errors are final.
        #expect(errors("5555555555554445", partial: true) == [.luhnFailed])
        #expect(errors("378282246310006", partial: true) == [.luhnFailed])
        #expect(errors("555555555555444", partial: true) == [])

        let typing = validator.validate(digits: ascii("4242"), partial: true)
        #expect(!typing.valid)
        #expect(typing.brand == .visa && typing.cvcLength == 3)
        let done = validator.validate(digits: ascii("4242424242424242"), partial: true)
        #expect(done.valid && done.errors.isEmpty)
    }

    @Test func binAndLast4NeverOverlapAndStayWithinPCI() {
        let visa = validator.validate(digits: ascii("4242424242424242"))
        // The visible prefix, min(6, length − 10) digits (issue 37, DESIGN §1): 6 stay hidden.
        #expect(visa.bin == "424242" && visa.last4 == "4242")
        let amex = validator.validate(digits: ascii("378282246310005"))
        #expect(amex.bin == "37828" && amex.last4 == "0005")
        let maestro = validator.validate(digits: luhnNumber("6759", length: 12))
        #expect(maestro.bin == "67" && maestro.last4?.count == 4)
        let short = validator.validate(digits: ascii("42424242424"))
        #expect(short.bin == nil && short.last4 == nil)
        let partial = validator.validate(digits: ascii("42424242"), partial: true)
        #expect(partial.bin == nil && partial.last4 == nil)
        let tooLong = validator.validate(digits: ascii("42424242424242424242"))
        #expect(tooLong.bin == nil && tooLong.last4 == nil)
        let nonDigit = validator.validate(digits: ascii("4242424242424x42"))
        #expect(nonDigit.bin == nil && nonDigit.last4 == nil && nonDigit.brand == nil && nonDigit.candidates.isEmpty)
        for length in 12...19 {
            let info = validator.validate(digits: luhnNumber("4", length: length))
            #expect((info.bin?.count ?? 0) + (info.last4?.count ?? 0) <= length - 6)
        }
    }

    @Test func binInfoComesFromTheBINOnly() throws {
        let table = try BINTable(csv: """
            42424242,42424242,visa,credit,Eight,US
            424242,424242,visa,credit,Six,US
            42424242424,42424242424,visa,credit,Eleven,US
            """)
        let v = CardValidator(binTable: table)
        // The 11-digit range would name 11 of 16 digits; only the 8-digit BIN is looked up.
        #expect(v.validate(digits: ascii("4242424242424242")).binInfo?.issuer == "Eight")
        #expect(v.validate(digits: ascii("424242424242424"), partial: true).binInfo?.issuer == "Six")
        #expect(v.validate(digits: ascii("424242"), partial: true).binInfo?.issuer == "Six")
        #expect(v.validate(digits: ascii("42424"), partial: true).binInfo == nil)
        #expect(CardValidator().validate(digits: ascii("4242424242424242")).binInfo == nil)
    }

    @Test func cvcPerBrand() {
        for brand in CardBrand.all {
            let n = brand == .amex ? 4 : 3
            #expect(validator.validateCVC(ascii(String(repeating: "7", count: n)), brand: brand) == nil, "\(brand)")
            #expect(validator.validateCVC(ascii(String(repeating: "7", count: 7 - n)), brand: brand) == .cvcLength, "\(brand)")
        }
        #expect(validator.validateCVC(ascii("12a"), brand: .visa) == .cvcMalformed)
        #expect(validator.validateCVC(ascii("1 23"), brand: nil) == .cvcMalformed)
        #expect(validator.validateCVC(ascii(""), brand: .visa) == .cvcLength)
        #expect(validator.validateCVC(ascii("123"), brand: nil) == nil)
        #expect(validator.validateCVC(ascii("1234"), brand: nil) == nil)
        #expect(validator.validateCVC(ascii("12"), brand: nil) == .cvcLength)
        #expect(validator.validateCVC(ascii("12345"), brand: nil) == .cvcLength)
        #expect(validator.validateCVC(ascii("1234"), brand: CardBrand(rawValue: "other")) == nil)
    }

    @Test func infoIsCodableAndHoldsNoMoreThanBINAndLast4() throws {
        let info = validator.validate(digits: ascii("5555555555554444"))
        let json = try JSONEncoder().encode(info)
        #expect(try JSONDecoder().decode(CardNumberInfo.self, from: json) == info)
        let text = String(decoding: json, as: UTF8.self)
        #expect(!text.contains("5555555555554444"))
        #expect(!text.contains("555555555555"))
        #expect(text.contains("\"mastercard\""))
        #expect(CardNumberInfo.empty.length == 0 && !CardNumberInfo.empty.valid && CardNumberInfo.empty.errors.isEmpty)
    }

    @Test func validatesBuffersInPlace() {
        let info = ascii("4242424242424242").withUnsafeBytes { validator.validate(digits: $0) }
        #expect(info.valid && info.bin == "424242")
    }
}
