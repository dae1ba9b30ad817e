import CardRules
import Testing

func ascii(_ s: String) -> [UInt8] { Array(s.utf8) }

@Suite struct BrandTableTests {
    let validator = CardValidator()

    /// Public test numbers of every brand (issuers' and processors' published test cards).
    static let testNumbers: [(String, CardBrand)] = [
        ("4242424242424242", .visa), ("4000056655665556", .visa), ("4111111111111111", .visa), ("4222222222222", .visa),
        ("4000000000000000006", .visa),
        ("5555555555554444", .mastercard), ("2223003122003222", .mastercard), ("5200828282828210", .mastercard),
        ("5105105105105100", .mastercard), ("2720992593319364", .mastercard),
        ("378282246310005", .amex), ("371449635398431", .amex), ("340000000000009", .amex),
        ("6011111111111117", .discover), ("6011000990139424", .discover), ("6445644564456445", .discover),
        ("3056930009020004", .diners), ("36227206271667", .diners), ("38520000023237", .diners),
        ("3566002020360505", .jcb), ("3530111333300000", .jcb), ("213112345678904", .jcb),
        ("6200000000000005", .unionpay), ("6205500000000000004", .unionpay),
        ("2200000000000004", .mir), ("2204000000000000", .mir),
        ("6521000000000007", .rupay), ("6073849700004947", .rupay), ("5081000000000001", .rupay),
        ("4011780000000006", .elo), ("5067000000000009", .elo), ("6362970000457013", .elo), ("5090000000000000", .elo),
        ("6062825624254001", .hipercard), ("3841000000000007", .hipercard),
        ("5060990580000217499", .verve), ("5078650000000008", .verve),
        ("6759649826438453", .maestro), ("6304000000000000", .maestro), ("5018000000000009", .maestro),
        ("6799990100000000019", .maestro),
    ]

    @Test(arguments: testNumbers)
    func recognisesPublicTestNumbers(number: String, brand: CardBrand) {
        let info = validator.validate(digits: ascii(number))
        #expect(info.brand == brand, "\(number)")
        #expect(info.valid, "\(number): \(info.errors)")
        #expect(info.luhn || brand == .unionpay)
        #expect(info.length == number.count)
        #expect(info.cvcLength == (brand == .amex ? 4 : 3))
    }

    @Test func everyBrandHasATestNumber() {
        #expect(Set(Self.testNumbers.map(\.1)) == Set(CardBrand.all))
        #expect(CardBrand.all.count == 13)
        for brand in CardBrand.all { #expect(BrandTable.standard.spec(for: brand) != nil) }
    }

    @Test func mostSpecificPrefixWins() {
        let t = BrandTable.standard
        #expect(t.brand(of: ascii("401178")) == .elo)          // elo inside visa's 4
        #expect(t.brand(of: ascii("401177")) == .visa)
        #expect(t.brand(of: ascii("606282")) == .hipercard)    // not rupay 60 / maestro 6x
        #expect(t.brand(of: ascii("6011")) == .discover)       // not rupay 60 / maestro
        #expect(t.brand(of: ascii("622126")) == .discover)     // inside unionpay 62
        #expect(t.brand(of: ascii("622125")) == .unionpay)
        #expect(t.brand(of: ascii("2200")) == .mir)
        #expect(t.brand(of: ascii("2221")) == .mastercard)
        #expect(t.brand(of: ascii("2220")) == nil)
        #expect(t.brand(of: ascii("506099")) == .verve)        // not maestro 50
        #expect(t.brand(of: ascii("6759")) == .maestro)
        #expect(t.brand(of: ascii("9")) == nil)
    }

    @Test func candidatesAsTheNumberIsTyped() {
        let t = BrandTable.standard
        #expect(t.candidates(for: ascii("")) == CardBrand.all)
        #expect(t.candidates(for: ascii("2")) == [.mastercard, .jcb, .mir])
        #expect(Set(t.candidates(for: ascii("22"))) == [.mastercard, .mir])
        #expect(Set(t.candidates(for: ascii("3"))).isSuperset(of: [.amex, .diners, .jcb]))
        #expect(t.candidates(for: ascii("37")) == [.amex])
        #expect(t.candidates(for: ascii("4")).first == .visa)
        #expect(t.candidates(for: ascii("4")).contains(.elo))
        #expect(t.candidates(for: ascii("9")).isEmpty)
    }

    @Test func luhn() {
        #expect(Luhn.isValid(ascii("4242424242424242")))
        #expect(!Luhn.isValid(ascii("4242424242424241")))
        #expect(!Luhn.isValid(ascii("")))
        #expect(Luhn.checkDigit(for: ascii("424242424242424")) == UInt8(ascii: "2"))
        #expect(Luhn.checkDigit(for: ascii("37828224631000")) == UInt8(ascii: "5"))
    }

    @Test func completeValidationErrors() {
        func errors(_ s: String, _ v: CardValidator = CardValidator()) -> [CardRulesError.Code] { v.validate(digits: ascii(s)).errors }
        #expect(errors("4242424242424241") == [.luhnFailed])
        #expect(errors("424242424242424") == [.invalidLength])
        #expect(errors("4242") == [.tooShort])
        #expect(errors("9999999999999995") == [.unknownBrand])
        #expect(errors("") == [.empty])
        #expect(errors("42424242424242424242") == [.tooLong])
        #expect(errors("5555555555554444", CardValidator(acceptedBrands: [.visa])) == [.brandNotAccepted])
        #expect(errors("5555555555554444", CardValidator(acceptedBrands: [.visa, .mastercard])) == [])
        #expect(errors("42424242x2424242") == [.nonDigit])
    }

    @Test func partialValidationOnlyReportsWhatTypingCannotFix() {
        let v = CardValidator()
        #expect(v.validate(digits: ascii("4242"), partial: true).errors == [])
        #expect(v.validate(digits: ascii("4242"), partial: true).valid == false)
        #expect(v.validate(digits: ascii("9"), partial: true).errors == [.unknownBrand])
        #expect(CardValidator(acceptedBrands: [.visa]).validate(digits: ascii("5"), partial: true).errors == [.brandNotAccepted])
        #expect(CardValidator(acceptedBrands: [.visa]).validate(digits: ascii("4"), partial: true).errors == [])
        #expect(v.validate(digits: ascii("37828224631000511"), partial: true).errors == [.invalidLength])
        #expect(v.validate(digits: ascii("4242424242424242"), partial: true).valid)
    }

    @Test func binAndLast4NeverOverlapAndStayWithinPCI() {
        let v = CardValidator()
        let visa = v.validate(digits: ascii("4242424242424242"))
        #expect(visa.bin == "42424242" && visa.last4 == "4242")
        let amex = v.validate(digits: ascii("378282246310005"))
        #expect(amex.bin == "378282" && amex.last4 == "0005")
        let short = v.validate(digits: ascii("42424242424"))
        #expect(short.bin == nil && short.last4 == nil)
    }

    @Test func cvcPerBrand() {
        let v = CardValidator()
        #expect(v.validateCVC(ascii("123"), brand: .visa) == nil)
        #expect(v.validateCVC(ascii("1234"), brand: .visa) == .cvcLength)
        #expect(v.validateCVC(ascii("1234"), brand: .amex) == nil)
        #expect(v.validateCVC(ascii("123"), brand: .amex) == .cvcLength)
        #expect(v.validateCVC(ascii("12a"), brand: .visa) == .cvcMalformed)
        #expect(v.validateCVC(ascii(""), brand: .visa) == .cvcMalformed)
        #expect(v.validateCVC(ascii("1234"), brand: nil) == nil)
        #expect(v.validateCVC(ascii("12"), brand: nil) == .cvcLength)
    }
}
