import CardRules
import Foundation
import Testing

@Suite struct CardExpiryTests {
    func parseCode(_ text: String) -> CardRulesError.Code? {
        do throws(CardRulesError) {
            _ = try CardExpiry.parse(text)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func parsesTheUsualForms() throws {
        let cases: [(String, Int, Int)] = [
            ("12/30", 12, 2030), ("1/2031", 1, 2031), ("07 / 29", 7, 2029), ("0729", 7, 2029), ("07/2029", 7, 2029),
            ("7/29", 7, 2029), (" 03/27 ", 3, 2027), ("03 /27", 3, 2027), ("03/\t27", 3, 2027), ("12/00", 12, 2000),
            ("01/2199", 1, 2199),
        ]
        for (text, month, year) in cases {
            let e = try CardExpiry.parse(text)
            #expect(e.month == month && e.year == year, "\(text)")
        }
        #expect(try CardExpiry.parse("7/29").text == "07/2029")
        #expect(try CardExpiry(month: 11, year: 2030).text == "11/2030")
    }

    @Test func refusesOtherForms() {
        for bad in ["", " ", "13", "ab/cd", "12/3", "12/30/1", "123/30", "12/300", "12-30", "12.30", "1230x", "12 30",
                    "/30", "12/", "１２/30", "0７/29", "072029", "12//30", String(repeating: "1", count: 100)] {
            #expect(parseCode(bad) == .expiryMalformed, "\(bad)")
        }
        #expect(parseCode("13/30") == .invalidMonth)
        #expect(parseCode("00/30") == .invalidMonth)
        #expect(parseCode("1330") == .invalidMonth)
        #expect(parseCode("12/2200") == .expiryMalformed)
        #expect(parseCode("12/1999") == .expiryMalformed)
    }

    @Test func initChecksMonthAndYear() {
        #expect((#expect(throws: CardRulesError.self) { _ = try CardExpiry(month: 0, year: 2030) })?.code == .invalidMonth)
        #expect((#expect(throws: CardRulesError.self) { _ = try CardExpiry(month: 13, year: 2030) })?.code == .invalidMonth)
        #expect((#expect(throws: CardRulesError.self) { _ = try CardExpiry(month: 1, year: 30) })?.code == .expiryMalformed)
        #expect((#expect(throws: CardRulesError.self) { _ = try CardExpiry(month: 1, year: 2200) })?.code == .expiryMalformed)
    }

    @Test func expiredAndTooFarAgainstAFixedMonth() throws {
        let now = CalendarMonth(year: 2026, month: 11)
        #expect(try CardExpiry(month: 11, year: 2026).validate(now: now) == nil)  // valid through its month
        #expect(try CardExpiry(month: 10, year: 2026).validate(now: now) == .expired)
        #expect(try CardExpiry(month: 12, year: 2025).validate(now: now) == .expired)
        #expect(try CardExpiry(month: 1, year: 2027).validate(now: now) == nil)
        #expect(try CardExpiry(month: 11, year: 2046).validate(now: now) == nil)  // exactly 20 years
        #expect(try CardExpiry(month: 12, year: 2046).validate(now: now) == .expiryTooFar)
        #expect(try CardExpiry(month: 12, year: 2031).validate(now: now, maxYearsAhead: 5) == .expiryTooFar)
        #expect(try CardExpiry(month: 11, year: 2031).validate(now: now, maxYearsAhead: 5) == nil)
        let january = CalendarMonth(year: 2027, month: 1)
        #expect(try CardExpiry(month: 12, year: 2026).validate(now: january) == .expired)
    }

    @Test func calendarMonths() {
        #expect(CalendarMonth(year: 2026, month: 13) == CalendarMonth(year: 2027, month: 1))
        #expect(CalendarMonth(year: 2026, month: 0) == CalendarMonth(year: 2025, month: 12))
        #expect(CalendarMonth(year: 2026, month: -11) == CalendarMonth(year: 2025, month: 1))
        #expect(CalendarMonth(year: 2026, month: 11).adding(months: 2) == CalendarMonth(year: 2027, month: 1))
        #expect(CalendarMonth(year: 2026, month: 1).adding(months: -1) == CalendarMonth(year: 2025, month: 12))
        #expect(CalendarMonth(year: 2025, month: 12) < CalendarMonth(year: 2026, month: 1))
        #expect(CalendarMonth(year: 2026, month: 3).description == "2026-03")
        let current = CalendarMonth.current
        #expect(current.year >= 2025 && current.year < 2200 && (1...12).contains(current.month))
    }

    @Test func codableChecksItsValues() throws {
        let e = try CardExpiry(month: 3, year: 2031)
        let json = try JSONEncoder().encode(e)
        #expect(try JSONDecoder().decode(CardExpiry.self, from: json) == e)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(CardExpiry.self, from: Data(#"{"month":13,"year":2031}"#.utf8)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(CardExpiry.self, from: Data(#"{"month":1,"year":31}"#.utf8)) }
    }
}
