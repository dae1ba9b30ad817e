import CardRules
import Testing

@Suite struct BINTableTests {
    func tableError(_ csv: String) -> CardRulesError? {
        do throws(CardRulesError) {
            _ = try BINTable(csv: csv)
            return nil
        } catch {
            return error
        }
    }

    @Test func parsesHeaderQuotesAndEmptyFields() throws {
        let table = try BINTable(csv: """
            bin_start,bin_end,brand,type,issuer,country
            424242,424242,visa,credit,"Stripe Test Bank, N.A.",US
            40000566,40000566,visa,debit,Narrow Bank,US
            400000,499999,visa,,Wide Bank,
            "555555","555555",mastercard,credit,"Quote ""Q"" Bank",GB
              510000 , 519999 , mastercard , debit , Spaced Bank , DE
            """)
        #expect(table.count == 5)
        let stripe = table.lookup(ascii("4242424242424242"))
        #expect(stripe == BINInfo(rangeStart: "424242", rangeEnd: "424242", brand: "visa", type: "credit", issuer: "Stripe Test Bank, N.A.", country: "US"))
        #expect(table.lookup(ascii("4111111111111111"))?.issuer == "Wide Bank")
        #expect(table.lookup(ascii("4111111111111111"))?.type == nil)
        #expect(table.lookup(ascii("4111111111111111"))?.country == nil)
        #expect(table.lookup(ascii("5555555555554444"))?.issuer == "Quote \"Q\" Bank")
        #expect(table.lookup(ascii("5105105105105100"))?.issuer == "Spaced Bank")
        #expect(table.lookup(ascii("5105105105105100"))?.country == "DE")
        #expect(table.lookup(ascii("6011111111111117")) == nil)
    }

    @Test func headerIsOptionalAndLineEndingsVary() throws {
        let plain = try BINTable(csv: "424242,424242,visa,credit,A,US\n")
        #expect(plain.count == 1)
        let crlf = try BINTable(csv: "\u{FEFF}start,end,brand,type,issuer,country\r\n\r\n424242,424242,visa,credit,A,US\r\n555555,555555,mastercard,credit,B,GB")
        #expect(crlf.count == 2)
        #expect(crlf.lookup(ascii("5555555555554444"))?.issuer == "B")
        let multiline = try BINTable(csv: "424242,424242,visa,credit,\"Two\nLines\",US\n555555,555555,mc,,,")
        #expect(multiline.lookup(ascii("4242424242424242"))?.issuer == "Two\nLines")
        #expect(multiline.lookup(ascii("5555555555554444"))?.brand == "mc")
        #expect(try BINTable(csv: "").count == 0)
        #expect(try BINTable(csv: "start,end,brand,type,issuer,country\n").count == 0)
        #expect(try BINTable(csv: "").lookup(ascii("4242424242424242")) == nil)
    }

    @Test func mostSpecificRangeWins() throws {
        let table = try BINTable(csv: """
            400000,499999,visa,,Wide,
            420000,429999,visa,,Middle,
            424242,424242,visa,,Six,
            42424242,42424299,visa,,EightWide,
            40000566,40000566,visa,,Eight,
            40000000,40009999,visa,,EightBroad,
            450000,459999,visa,,First,
            450000,459999,visa,,Second,
            """)
        #expect(table.lookup(ascii("4242424242424242"))?.issuer == "EightWide")  // 58 eight-digit BINs < one 6-digit (100)
        #expect(table.lookup(ascii("4242420042424242"))?.issuer == "Six")
        #expect(table.lookup(ascii("4200000000000000"))?.issuer == "Middle")
        #expect(table.lookup(ascii("4000056655665556"))?.issuer == "Eight")  // one 8-digit BIN beats all
        #expect(table.lookup(ascii("4000100000000000"))?.issuer == "EightBroad")  // 1/10000 of 6 digits
        #expect(table.lookup(ascii("4111111111111111"))?.issuer == "Wide")
        #expect(table.lookup(ascii("4500000000000000"))?.issuer == "First")  // equal ranges: earlier row
        #expect(table.lookup(ascii("40000")) == nil)  // too short for any range
        #expect(table.lookup(ascii("400005"))?.issuer == "Wide")  // 6 digits: only 6-digit ranges apply
        #expect(table.lookup(ascii("42424x")) == nil)
    }

    /// Property: lookups agree with a brute-force scan over random overlapping ranges.
    @Test func lookupsAgreeWithABruteForceScan() throws {
        var random = SeededRandom(seed: 99)
        var rows: [(start: Int, end: Int, length: Int)] = []
        var csv = "start,end,brand,type,issuer,country\n"
        for i in 0..<400 {
            let length = [6, 8][Int.random(in: 0...1, using: &random)]
            let scale = length == 6 ? 1 : 100
            let start = Int.random(in: 400_000...409_999, using: &random) * scale + Int.random(in: 0..<scale, using: &random)
            let end = min(start + Int.random(in: 0...(length == 6 ? 500 : 50_000), using: &random), (length == 6 ? 999_999 : 99_999_999))
            rows.append((start, end, length))
            csv += "\(start),\(end),visa,,row\(i),\n"
        }
        let table = try BINTable(csv: csv)
        #expect(table.count == 400)
        for _ in 0..<2000 {
            let number = ascii("40") + random.digits(1) + random.digits(13)
            let six = Int(String(decoding: number.prefix(6), as: UTF8.self))!
            let eight = Int(String(decoding: number.prefix(8), as: UTF8.self))!
            var best: Int?
            func width(_ i: Int) -> Int { (rows[i].end - rows[i].start + 1) * (rows[i].length == 6 ? 100 : 1) }
            for (i, r) in rows.enumerated() {
                let p = r.length == 6 ? six : eight
                guard p >= r.start && p <= r.end else { continue }
                if let b = best {
                    if width(i) < width(b) || (width(i) == width(b) && r.length > rows[b].length) { best = i }
                } else {
                    best = i
                }
            }
            #expect(table.lookup(number)?.issuer == best.map { "row\($0)" })
        }
    }

    @Test func badRowsNameTheirLine() {
        let cases: [(String, Int)] = [
            ("424242,4242424,visa,credit,X,US", 1),  // unequal lengths
            ("bin,end\n424242,424242,visa", 2),  // too few fields
            ("1,2,3,4,5,6\n", 1),  // too short
            ("424242,424242,visa,c,X,US,extra", 1),
            ("h,h,h,h,h,h\n\n424242,424242,v,t,i,c\n\n999999,100000,v,t,i,c", 5),  // start above end
            ("424242,424242,v,t,i,c\n123456789012,123456789012,v,t,i,c", 2),  // 12 digits
            ("424242,42424x,v,t,i,c", 1),
            ("424242,424242,v,t,i,c\n\"424242,424242,visa,c,X,US", 2),  // unclosed quote
            ("424242,424242,v,t,\"i\"x,c", 1),  // text after a closing quote
            ("424242,424242,v,t,i\"x,c", 1),  // quote inside an unquoted field
            ("424242,424242,v,t,\"a\nb\",c\n555555,55555,v,t,i,c", 3),  // lines count inside quotes
            ("header\n,424242,v,t,i,c", 2),
        ]
        for (csv, line) in cases {
            let e = tableError(csv)
            #expect(e?.code == .binTableInvalid, "\(csv)")
            #expect(e?.message.contains("line \(line):") == true, "\(csv): \(e?.message ?? "no error")")
        }
    }

    @Test func validatorAttachesIssuerInformation() throws {
        let table = try BINTable(csv: "400005,400005,visa,debit,Narrow Bank,US\n")
        let info = CardValidator(binTable: table).validate(digits: ascii("4000056655665556"))
        #expect(info.binInfo?.country == "US")
        #expect(info.binInfo?.issuer == "Narrow Bank")
        #expect(info.valid)
    }
}
