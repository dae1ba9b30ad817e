import Foundation
import Testing

@Suite(.serialized, .ownThread) struct SealOpenCLITests {
    @Test func keygenPrintsKidWritesModesAndRefusesOverwrite() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        #expect(keys.kid.count == 16)
        let attrs = try FileManager.default.attributesOfItem(atPath: keys.key)
        #expect((attrs[.posixPermissions] as? Int) == 0o600)
        #expect((try FileManager.default.attributesOfItem(atPath: keys.pub)[.posixPermissions] as? Int) == 0o644)
        // The kid is BLAKE2b-256 of the public key, first 8 bytes, as Python computes it.
        #expect(try interop("kid", keys.pub).out == keys.kid + "\n")
        #expect(try vault("kid", keys.pub).out == keys.kid + "\n")
        // The fingerprint key exists already: keygen refuses to overwrite it (KeyFileTests checks
        // the O_EXCL path that guards the pair files too).
        let before = try String(contentsOfFile: "\(keys.dir)/fingerprint.fk", encoding: .utf8)
        let again = try vault("keygen", "--fingerprint", "--out", keys.dir)
        #expect(try String(contentsOfFile: "\(keys.dir)/fingerprint.fk", encoding: .utf8) == before)
        #expect(again.status == 2)
        #expect(again.stderr.contains("KEY_FILE_EXISTS"))
    }

    @Test func sealOpenRoundTripDropsOneTrailingNewline() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        let sealed = try vault("seal", "--key", keys.pub, input: "s3cret value\n")
        #expect(sealed.status == 0)
        #expect(sealed.out.hasPrefix("vault:v1:\(keys.kid):"))
        #expect(sealed.out.split(separator: "\n").count == 1)
        let opened = try vault("open", "--key", keys.key, input: sealed.out)
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.out == "s3cret value")
        // Bytes that are not UTF-8 survive.
        let binary = Data([0, 255, 10, 13, 0x80, 10])
        let sealedBinary = try vault(["seal", "--key", keys.pub], input: binary)
        let openedBinary = try vault(["open", "--key", keys.key], input: sealedBinary.stdout)
        #expect(openedBinary.stdout == binary.dropLast())
    }

    @Test func pynaclOpensWhatWeSealAndWeOpenWhatItSeals() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        let values = ["", "a", "4242424242424242", String(repeating: "é", count: 300)]
        let ours = try vault("seal", "--lines", "--key", keys.pub, input: values.joined(separator: "\n") + "\n")
        #expect(ours.status == 0, "\(ours.stderr)")
        let theirsOpen = try interop("open", keys.key, input: ours.out)
        #expect(theirsOpen.status == 0, "\(theirsOpen.stderr)")
        #expect(theirsOpen.out == values.map { Data($0.utf8).map { String(format: "%02x", $0) }.joined() + "\n" }.joined())
        // A single sealed value too.
        let single = try vault("seal", "--key", keys.pub, input: "one value\n")
        #expect(try interop("open", keys.key, input: single.out).out == Data("one value".utf8).map { String(format: "%02x", $0) }.joined() + "\n")

        let hexLines = values.map { Data($0.utf8).map { String(format: "%02x", $0) }.joined() }.joined(separator: "\n") + "\n"
        let pynaclSealed = try interop("seal", keys.pub, input: hexLines)
        #expect(pynaclSealed.status == 0, "\(pynaclSealed.stderr)")
        let opened = try vault("open", "--lines", "--key", keys.key, input: pynaclSealed.out)
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.out == values.joined(separator: "\n") + "\n")
    }

    @Test func linesKeepOrderAcrossWorkersAndReportTheBadLine() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        let input = (1...3000).map { "value-\($0)" }.joined(separator: "\n") + "\n"
        let sealed = try vault("seal", "--lines", "--jobs", "2", "--key", keys.pub, input: input)
        #expect(sealed.status == 0)
        var lines = sealed.out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 3001)
        let opened = try vault("open", "--lines", "--jobs", "2", "--key", keys.key, input: sealed.out)
        #expect(opened.out == input)
        // Line 1234 corrupt: 1233 lines come out, the error names line 1234, exit 4.
        var raw = Array(lines[1233].utf8)
        raw[raw.count - 5] = raw[raw.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        lines[1233] = String(decoding: raw, as: UTF8.self)
        let bad = try vault("open", "--lines", "--key", keys.key, input: lines.joined(separator: "\n"))
        #expect(bad.status == 4)
        #expect(bad.stderr.contains("line 1234: SEALED_VALUE_CORRUPT"), "\(bad.stderr)")
        #expect(bad.out == (1...1233).map { "value-\($0)\n" }.joined())
        // A malformed line: exit 5 and its number.
        lines[9] = "not a sealed value"
        let malformed = try vault("open", "--lines", "--key", keys.key, input: lines.joined(separator: "\n"))
        #expect(malformed.status == 5)
        #expect(malformed.stderr.contains("line 10: SEALED_VALUE_MALFORMED"))
    }

    @Test func errorsHaveTheirCodesAndExitCodes() throws {
        let keys = try TestKeys(), other = try TestKeys()
        defer { keys.remove(); other.remove() }
        let sealed = try vault("seal", "--key", keys.pub, input: "x").out
        let wrong = try vault("open", "--key", other.key, input: sealed)
        #expect(wrong.status == 3)
        #expect(wrong.stderr.contains("KEY_MISMATCH"))
        var truncated = sealed.trimmingCharacters(in: .newlines)
        truncated = String(truncated.dropLast(8))
        let t = try vault("open", "--key", keys.key, input: truncated)
        #expect(t.status == 4, "\(t.stderr)")
        #expect(t.stderr.contains("SEALED_VALUE_CORRUPT"))
        // Too short to be a box, under a kid we do not hold: the kid is what is wrong.
        let foreign = try vault("open", "--key", keys.key, input: "vault:v1:0000000000000000:AAAA")
        #expect(foreign.status == 3, "\(foreign.stderr)")
        #expect(foreign.stderr.contains("KEY_MISMATCH"))
        let malformed = try vault("open", "--key", keys.key, input: "vault:v1:nothex:AAAA")
        #expect(malformed.status == 5)
        #expect(malformed.stderr.contains("SEALED_VALUE_MALFORMED"))
        // A public key given to open, a secret key given to seal: the wrong kind, said so.
        let kind1 = try vault("open", "--key", keys.pub, input: sealed)
        #expect(kind1.status == 2)
        #expect(kind1.stderr.contains("KEY_FILE_WRONG_KIND"), "\(kind1.stderr)")
        let kind2 = try vault("seal", "--key", keys.key, input: "x")
        #expect(kind2.status == 2)
        #expect(kind2.stderr.contains("KEY_FILE_WRONG_KIND"))
        #expect(kind2.stderr.contains("secret key"))
        // A group-readable secret key is refused before use.
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: keys.key)
        let perms = try vault("open", "--key", keys.key, input: sealed)
        #expect(perms.status == 2)
        #expect(perms.stderr.contains("KEY_FILE_PERMISSIONS"))
    }

    /// The sealed message is the input less one "\n": a "\r" stays (docs/sealed-value.md), also per
    /// line.
    @Test func carriageReturnsAreSealedAsGiven() throws {
        let keys = try TestKeys()
        defer { keys.remove() }
        let one = try vault("seal", "--key", keys.pub, input: "abc\r\n")
        #expect(try vault("open", "--key", keys.key, input: one.out).out == "abc\r")
        let lines = try vault("seal", "--lines", "--key", keys.pub, input: "a\r\nb\r")
        let opened = try interop("open", keys.key, input: lines.out)
        #expect(opened.out == "610d\n620d\n")
    }
}
