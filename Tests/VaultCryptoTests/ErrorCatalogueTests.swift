import CardRules
import Foundation
import Testing
import VaultCrypto

/// The catalogue (`ErrorCode`) is the one list of codes: docs/errors.md and docs/cli.md's exit
/// table must say exactly what it says.
@Suite struct ErrorCatalogueTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func doc(_ name: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent("docs/" + name), encoding: .utf8)
    }

    /// Backticked upper-snake identifiers in `text` (a trailing `*` kept: a prefix).
    static func codes(in text: String) -> [String] {
        text.matches(of: /`([A-Z][A-Z0-9_]*\*?)`/).map { String($0.output.1) }
    }

    @Test func codesAreUpperSnakeAndEveryCardRuleIsInTheCatalogue() {
        for code in ErrorCode.allCases {
            #expect(code.rawValue.wholeMatch(of: /[A-Z][A-Z0-9]*(_[A-Z0-9]+)+/) != nil, "\(code)")
            #expect(!code.meaning.isEmpty && !code.meaning.contains("\n"), "\(code)")
            #expect([400, 403, 404, 405, 409, 410, 413, 415, 422, 429, 502, 503, 504].contains(code.status), "\(code)")
        }
        for rule in CardRulesError.Code.allCases {
            #expect(ErrorCode(cardRules: rule).rawValue == rule.rawValue)
            #expect(ErrorCode(cardRules: rule).exitCode == 6)
        }
    }

    /// Every row of docs/errors.md's code tables: the codes of its first cell and the statuses in
    /// its brackets. Exactly the catalogue's codes, with the catalogue's statuses; a code shown
    /// without a status answers 422.
    @Test func errorsDocumentListsExactlyTheCatalogue() throws {
        var documented: [String: Set<Int>] = [:]
        for line in try Self.doc("errors.md").split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.dropFirst(2).prefix { $0 != "|" }
            let statuses = cell.matches(of: /\[([^\]]*)\]/).flatMap { bracket in
                bracket.output.1.matches(of: /\b([1-5][0-9][0-9])\b/).compactMap { Int($0.output.1) }
            }
            for code in Self.codes(in: String(cell)) {
                documented[code, default: []].formUnion(statuses)
            }
        }
        #expect(Set(documented.keys) == Set(ErrorCode.allCases.map(\.rawValue)),
                "only documented: \(Set(documented.keys).subtracting(ErrorCode.allCases.map(\.rawValue)).sorted()); only in the catalogue: \(Set(ErrorCode.allCases.map(\.rawValue)).subtracting(documented.keys).sorted())")
        for code in ErrorCode.allCases {
            guard let statuses = documented[code.rawValue] else { continue }
            let expected = Set([code.status] + (code.entry.otherStatus.map { [$0] } ?? []))
            #expect((statuses.isEmpty ? [422] : statuses) == expected, "\(code): docs/errors.md says \(statuses.sorted()), the catalogue \(expected.sorted())")
        }
    }

    /// docs/cli.md's exit table: each row (2 to 13) names its codes (a `PREFIX_*`, or "card-rule
    /// codes"); every code of the catalogue with an exit code other than 1 is in its row, and every
    /// code a row names has that row's exit code.
    @Test func exitTableMatchesTheCatalogue() throws {
        let text = try Self.doc("cli.md")
        let table = try #require(text.range(of: "## Exit codes")).upperBound
        var rows: [Int32: Set<ErrorCode>] = [:]
        for line in text[table...].split(separator: "\n") {
            guard let match = line.wholeMatch(of: /\| ([0-9]+) \| (.*) \|/), let exit = Int32(match.output.1) else { continue }
            let meaning = String(match.output.2)
            var named = Set<ErrorCode>()
            for token in Self.codes(in: meaning) {
                if token.hasSuffix("*") {
                    let prefix = token.dropLast()
                    let expanded = ErrorCode.allCases.filter { $0.rawValue.hasPrefix(prefix) }
                    #expect(!expanded.isEmpty, "\(token) names no code")
                    named.formUnion(expanded)
                } else {
                    let code = ErrorCode(rawValue: token)
                    #expect(code != nil, "docs/cli.md names \(token), which is not in the catalogue")
                    if let code { named.insert(code) }
                }
            }
            if meaning.contains("card-rule codes") { named.formUnion(CardRulesError.Code.allCases.map(ErrorCode.init(cardRules:))) }
            rows[exit] = named
        }
        for (exit, codes) in rows {
            for code in codes { #expect(code.exitCode == exit, "docs/cli.md lists \(code) under \(exit); the catalogue says \(code.exitCode)") }
        }
        for code in ErrorCode.allCases where code.exitCode != 1 {
            #expect(rows[code.exitCode]?.contains(code) == true, "\(code) (exit \(code.exitCode)) is not in docs/cli.md's row \(code.exitCode)")
        }
        #expect(Set(rows.keys).isSuperset(of: ErrorCode.ExitStatus.allCases.map(\.rawValue)))
    }
}
