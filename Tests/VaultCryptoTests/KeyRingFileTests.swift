import Foundation
import Testing
import VaultCrypto

/// The key ring description (`ring.json`): strict parsing with errors that name the setting,
/// a stable text form, and the add / promote / retire rules that keep exactly one primary.
@Suite struct KeyRingFileTests {
    static let kidA = KeyID("0123456789abcdef")!
    static let kidB = KeyID("fedcba9876543210")!
    static let kidC = KeyID("00112233445566ff")!
    static let kidD = KeyID("aaaaaaaaaaaaaaaa")!
    /// 2027-01-15T08:00:00Z.
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    /// 2027-01-15T09:00:00Z.
    static let t1 = Date(timeIntervalSince1970: 1_800_003_600)

    /// A ring with A primary, B active, C retired.
    static func sampleRing() throws -> KeyRingFile {
        try KeyRingFile(entries: [
            .init(kid: kidA, status: .primary, created: t0),
            .init(kid: kidB, status: .active, created: t0, changed: t1),
            .init(kid: kidC, status: .retired, created: t0, changed: t1),
        ])
    }

    /// One entry's JSON text, for building ring files by hand.
    static func entry(_ kid: String, _ status: String, created: String = "2026-11-23T15:00:00Z", extra: String = "") -> String {
        "{\"kid\":\"\(kid)\",\"status\":\"\(status)\",\"created\":\"\(created)\"\(extra)}"
    }

    /// A ring file with the given entries (and optional extra top-level text).
    static func ringJSON(_ entries: [String], v: String = "1", extra: String = "") -> String {
        "{\"v\":\(v),\"keys\":[" + entries.joined(separator: ",") + "]\(extra)}"
    }

    static let onePrimary = entry("0123456789abcdef", "primary")

    /// Parses `json` expecting a refusal; returns the error.
    func refusal(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) -> VaultError? {
        return #expect(throws: VaultError.self, "\(json)", sourceLocation: sourceLocation) { _ = try KeyRingFile.parse(Data(json.utf8)) }
    }

    // MARK: - File round trip and text

    /// A ring written with `write(path:)` loads back equal, with mode 0644 and no temporary file left.
    @Test func writeThenLoadRoundTrips() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let ring = try Self.sampleRing()
        let path = "\(dir)/\(KeyRingFile.fileName)"
        try ring.write(path: path)
        let loaded = try KeyRingFile.load(path: path)
        #expect(loaded == ring)
        #expect(loaded.primary == Self.kidA)
        #expect(loaded.status(of: Self.kidB) == .active)
        #expect(loaded.status(of: Self.kidC) == .retired)
        #expect(loaded.status(of: Self.kidD) == nil)
        #expect(loaded.openingKids == [Self.kidA, Self.kidB])
        #expect(readFile(path) == ring.text)
        #expect(fileMode(path) == 0o644)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [KeyRingFile.fileName])
        // Writing again over an existing ring replaces it.
        var changed = ring
        try changed.add(Self.kidD, now: Self.t1)
        try changed.write(path: path)
        #expect(try KeyRingFile.load(path: path) == changed)
    }

    /// The text form is exactly one key per line in file order, with whole-second UTC times.
    /// The old temporary name (`ring.json.tmp-<pid>`, opened O_CREAT|O_TRUNC) followed a symlink
    /// planted there: writing the ring overwrote the link's target and left it 0644. Now the
    /// temporary file has a random name and is created O_EXCL|O_NOFOLLOW: the target is untouched.
    @Test func aSymlinkAtTheOldTemporaryNameIsNeverFollowed() throws {
        let dir = makeTemporaryDirectory()
        let elsewhere = makeTemporaryDirectory()
        defer { removeTree(dir); removeTree(elsewhere) }
        let victim = "\(elsewhere)/victim.key"
        writeFile(victim, "vault:sk:v1:not-to-be-overwritten\n", mode: 0o600)
        let path = "\(dir)/\(KeyRingFile.fileName)"
        for name in ["\(path).tmp-\(getpid())", "\(path).tmp"] { #expect(symlink(victim, name) == 0) }
        let ring = try Self.sampleRing()
        try ring.write(path: path)
        #expect(readFile(victim) == "vault:sk:v1:not-to-be-overwritten\n")
        #expect(fileMode(victim) == 0o600)
        #expect(try KeyRingFile.load(path: path) == ring)
        var st = stat()
        #expect(lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && st.st_mode & 0o777 == 0o644)
    }

    /// A keys directory that group or others may write (sticky /tmp included) is refused: nothing
    /// is written there.
    @Test(arguments: [0o777, 0o775, 0o757, 0o1777] as [mode_t])
    func aDirectoryOthersMayWriteIsRefused(mode: mode_t) throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        #expect(chmod(dir, mode) == 0)
        let error = #expect(throws: VaultError.self) { try Self.sampleRing().write(path: "\(dir)/\(KeyRingFile.fileName)") }
        #expect(error?.code.rawValue == "KEYS_DIRECTORY_UNSAFE")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
        let keygen = #expect(throws: VaultError.self) { try KeyFiles.generateKeyPair(directory: dir) }
        #expect(keygen?.code.rawValue == "KEYS_DIRECTORY_UNSAFE")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
    }

    /// A 0755 directory that belongs to another (non-root) user is refused too: its owner may
    /// write it whatever its mode. Only checkable as root (the test chowns to nobody).
    @Test func aDirectoryOfAnotherUserIsRefused() throws {
        guard geteuid() == 0 else { return }
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        #expect(chmod(dir, 0o755) == 0)
        #expect(chown(dir, 65534, 65534) == 0)
        let error = #expect(throws: VaultError.self) { try Self.sampleRing().write(path: "\(dir)/\(KeyRingFile.fileName)") }
        #expect(error?.code.rawValue == "KEYS_DIRECTORY_UNSAFE")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
        // Back to root's: written.
        #expect(chown(dir, 0, 0) == 0)
        try Self.sampleRing().write(path: "\(dir)/\(KeyRingFile.fileName)")
    }

    @Test func textFormIsStable() throws {
        let ring = try Self.sampleRing()
        let expected = """
            {"v":1,"keys":[
                {"kid":"0123456789abcdef","status":"primary","created":"2027-01-15T08:00:00Z","changed":"2027-01-15T08:00:00Z"},
                {"kid":"fedcba9876543210","status":"active","created":"2027-01-15T08:00:00Z","changed":"2027-01-15T09:00:00Z"},
                {"kid":"00112233445566ff","status":"retired","created":"2027-01-15T08:00:00Z","changed":"2027-01-15T09:00:00Z"}
            ]}

            """
        #expect(ring.text == expected)
        // Parsing the text gives the same ring, whose text is the same again.
        let again = try KeyRingFile.parse(Data(ring.text.utf8))
        #expect(again == ring)
        #expect(again.text == ring.text)
        #expect(KeyRingFile.timestamp(Self.t0) == "2027-01-15T08:00:00Z")
    }

    /// Sub-second times are cut to whole seconds when an entry is made, so a ring round-trips equal.
    @Test func timesAreWholeSeconds() throws {
        let ring = try KeyRingFile(entries: [.init(kid: Self.kidA, status: .primary, created: Self.t0.addingTimeInterval(0.75))])
        #expect(ring.entries[0].created == Self.t0)
        #expect(ring.entries[0].changed == Self.t0)
        #expect(try KeyRingFile.parse(Data(ring.text.utf8)) == ring)
    }

    /// An entry without `changed` reads as changed when it was created, and is written with it.
    @Test func changedDefaultsToCreated() throws {
        let ring = try KeyRingFile.parse(Data(Self.ringJSON([Self.onePrimary]).utf8))
        #expect(ring.entries.count == 1)
        #expect(ring.entries[0].changed == ring.entries[0].created)
        #expect(ring.text.contains("\"created\":\"2026-11-23T15:00:00Z\",\"changed\":\"2026-11-23T15:00:00Z\""))
    }

    // MARK: - Refusals

    /// Text that is not a JSON object is KEY_RING_INVALID.
    @Test func refusesNonJSON() {
        for text in ["not json", "", "[1,2]", "\"ring\"", "{\"v\":1,"] {
            let e = refusal(text)
            #expect(e?.code == .keyRingInvalid, "\(text)")
            #expect(e?.message.contains("JSON object") == true, "\(text)")
        }
    }

    /// A version other than the number 1 is refused, naming `v`.
    @Test func refusesOtherVersions() {
        for v in ["2", "0", "\"1\"", "null"] {
            let e = refusal(Self.ringJSON([Self.onePrimary], v: v))
            #expect(e?.code == .keyRingInvalid, "v=\(v)")
            #expect(e?.field == "v", "v=\(v)")
            #expect(e?.message.contains("\"v\"") == true, "v=\(v)")
        }
        let missing = refusal("{\"keys\":[\(Self.onePrimary)]}")
        #expect(missing?.field == "v")
    }

    /// An unknown top-level key is refused, naming it.
    @Test func refusesUnknownTopLevelKey() {
        let e = refusal(Self.ringJSON([Self.onePrimary], extra: ",\"primary\":\"0123456789abcdef\""))
        #expect(e?.code == .keyRingInvalid)
        #expect(e?.field == "primary")
        #expect(e?.message.contains("primary") == true)
    }

    /// An unknown key inside an entry is refused, naming `keys[i].<key>`.
    @Test func refusesUnknownEntryKey() {
        let e = refusal(Self.ringJSON([Self.entry("0123456789abcdef", "primary", extra: ",\"extra\":true")]))
        #expect(e?.code == .keyRingInvalid)
        #expect(e?.field == "keys[0].extra")
        #expect(e?.message.contains("keys[0].extra") == true)
        // The index is the entry's own.
        let second = refusal(Self.ringJSON([Self.onePrimary, Self.entry("fedcba9876543210", "active", extra: ",\"note\":\"x\"")]))
        #expect(second?.field == "keys[1].note")
    }

    /// `keys` must be a list of objects.
    @Test func refusesKeysThatAreNotAListOfObjects() {
        let notList = refusal("{\"v\":1,\"keys\":{}}")
        #expect(notList?.code == .keyRingInvalid)
        #expect(notList?.field == "keys")
        let notObject = refusal("{\"v\":1,\"keys\":[\"0123456789abcdef\"]}")
        #expect(notObject?.code == .keyRingInvalid)
        #expect(notObject?.field == "keys[0]")
    }

    /// A kid that is not 16 lowercase hex characters is refused, naming `keys[i].kid`.
    @Test func refusesBadKid() {
        for kid in ["0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "0123456789abcdeg", ""] {
            let e = refusal(Self.ringJSON([Self.entry(kid, "primary")]))
            #expect(e?.code == .keyRingInvalid, "\(kid)")
            #expect(e?.field == "keys[0].kid", "\(kid)")
            #expect(e?.message.contains("keys[0].kid") == true, "\(kid)")
        }
        let missing = refusal(Self.ringJSON(["{\"status\":\"primary\",\"created\":\"2026-11-23T15:00:00Z\"}"]))
        #expect(missing?.field == "keys[0].kid")
    }

    /// A status other than primary, active or retired is refused, naming `keys[i].status`.
    @Test func refusesBadStatus() {
        for status in ["standby", "Primary", "PRIMARY", ""] {
            let e = refusal(Self.ringJSON([Self.entry("0123456789abcdef", status)]))
            #expect(e?.code == .keyRingInvalid, "\(status)")
            #expect(e?.field == "keys[0].status", "\(status)")
            #expect(e?.message.contains("keys[0].status") == true, "\(status)")
        }
    }

    /// A created time that is not a real UTC `YYYY-MM-DDTHH:MM:SSZ` is refused, naming `keys[i].created`.
    @Test func refusesBadCreatedTime() throws {
        let bad = [
            "2026-02-30T00:00:00Z",        // no such day
            "2026-11-23 15:00:00",         // not the form
            "2026-11-23T15:00:00",         // no zone
            "2026-11-23T15:00:00+00:00",   // not Z
            "2026-11-23T15:00:00.5Z",      // fraction
            "2026-13-01T00:00:00Z",        // no such month
            "2026-11-23T24:00:00Z",        // no such hour
            "",
        ]
        for created in bad {
            let e = refusal(Self.ringJSON([Self.entry("0123456789abcdef", "primary", created: created)]))
            #expect(e?.code == .keyRingInvalid, "\(created)")
            #expect(e?.field == "keys[0].created", "\(created)")
            #expect(e?.message.contains("keys[0].created") == true, "\(created)")
        }
        // Leap day of a leap year is a real day.
        let leap = try KeyRingFile.parse(Data(Self.ringJSON([Self.entry("0123456789abcdef", "primary", created: "2028-02-29T00:00:00Z")]).utf8))
        #expect(KeyRingFile.timestamp(leap.entries[0].created) == "2028-02-29T00:00:00Z")
    }

    /// A bad `changed` time is refused, naming `keys[i].changed`.
    @Test func refusesBadChangedTime() {
        let e = refusal(Self.ringJSON([Self.entry("0123456789abcdef", "primary", extra: ",\"changed\":\"2026-02-30T00:00:00Z\"")]))
        #expect(e?.code == .keyRingInvalid)
        #expect(e?.field == "keys[0].changed")
        let notText = refusal(Self.ringJSON([Self.entry("0123456789abcdef", "primary", extra: ",\"changed\":1800000000")]))
        #expect(notText?.field == "keys[0].changed")
    }

    /// A ring listing no key is refused.
    @Test func refusesAnEmptyRing() {
        let e = refusal(Self.ringJSON([]))
        #expect(e?.code == .keyRingInvalid)
        #expect(e?.field == "keys")
        #expect(e?.message.contains("no key") == true)
        let direct = #expect(throws: VaultError.self) { _ = try KeyRingFile(entries: []) }
        #expect(direct?.code == .keyRingInvalid)
    }

    /// A ring with two primaries, or none, is refused: it needs exactly one.
    @Test func refusesTwoOrZeroPrimaries() {
        let two = refusal(Self.ringJSON([Self.onePrimary, Self.entry("fedcba9876543210", "primary")]))
        #expect(two?.code == .keyRingInvalid)
        #expect(two?.field == "keys")
        #expect(two?.message.contains("2 primary") == true)
        let zero = refusal(Self.ringJSON([Self.entry("0123456789abcdef", "active"), Self.entry("fedcba9876543210", "retired")]))
        #expect(zero?.code == .keyRingInvalid)
        #expect(zero?.field == "keys")
        #expect(zero?.message.contains("0 primary") == true)
    }

    /// A kid listed twice is refused, naming it.
    @Test func refusesADuplicateKid() {
        let e = refusal(Self.ringJSON([Self.onePrimary, Self.entry("0123456789abcdef", "active")]))
        #expect(e?.code == .keyRingInvalid)
        #expect(e?.field == "keys")
        #expect(e?.message.contains("0123456789abcdef") == true)
        let direct = #expect(throws: VaultError.self) {
            _ = try KeyRingFile(entries: [
                .init(kid: Self.kidA, status: .primary, created: Self.t0), .init(kid: Self.kidA, status: .retired, created: Self.t0),
            ])
        }
        #expect(direct?.code == .keyRingInvalid)
    }

    /// `load` says which file is at fault and keeps the setting's name in `field`; a missing file
    /// is KEY_RING_NOT_FOUND.
    @Test func loadNamesTheFileAndTheSetting() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = "\(dir)/ring.json"
        writeFile(path, Self.ringJSON([Self.entry("0123456789abcdef", "primary", extra: ",\"extra\":1")]), mode: 0o644)
        let e = #expect(throws: VaultError.self) { _ = try KeyRingFile.load(path: path) }
        #expect(e?.code == .keyRingInvalid)
        #expect(e?.field == "keys[0].extra")
        #expect(e?.message.hasPrefix(path) == true)
        #expect(e?.message.contains("keys[0].extra") == true)

        let missing = #expect(throws: VaultError.self) { _ = try KeyRingFile.load(path: "\(dir)/none.json") }
        #expect(missing?.code == .keyRingNotFound)
    }

    // MARK: - Changes

    /// Adding a new kid lists it as active (created now); adding a listed kid is refused and
    /// changes nothing.
    @Test func addListsNewKeysAsActiveAndRefusesListedOnes() throws {
        var ring = try Self.sampleRing()
        try ring.add(Self.kidD, now: Self.t1.addingTimeInterval(0.5))
        #expect(ring.status(of: Self.kidD) == .active)
        #expect(ring.entries.last?.kid == Self.kidD)
        #expect(ring.entries.last?.created == Self.t1)
        #expect(ring.primary == Self.kidA)
        let before = ring
        for kid in [Self.kidA, Self.kidB, Self.kidC, Self.kidD] {
            let e = #expect(throws: VaultError.self, "\(kid)") { try ring.add(kid, now: Self.t1) }
            #expect(e?.code == .keyRingChangeRefused, "\(kid)")
        }
        #expect(ring == before)
    }

    /// Promoting an active key makes it the primary and the old primary active, both changed now.
    @Test func promoteSwapsThePrimary() throws {
        var ring = try Self.sampleRing()
        try ring.promote(Self.kidB, now: Self.t1)
        #expect(ring.primary == Self.kidB)
        #expect(ring.status(of: Self.kidA) == .active)
        #expect(ring.status(of: Self.kidB) == .primary)
        #expect(ring.status(of: Self.kidC) == .retired)
        #expect(ring.entries.filter { $0.status == .primary }.count == 1)
        #expect(ring.entries.first { $0.kid == Self.kidA }?.changed == Self.t1)
        #expect(ring.entries.first { $0.kid == Self.kidB }?.changed == Self.t1)
        #expect(ring.entries.map(\.kid) == [Self.kidA, Self.kidB, Self.kidC], "file order is kept")
        try ring.validate()
    }

    /// Promoting a retired key, or the primary itself, is refused and changes nothing.
    @Test func promoteRefusesRetiredAndPrimary() throws {
        var ring = try Self.sampleRing()
        let before = ring
        let retired = #expect(throws: VaultError.self) { try ring.promote(Self.kidC, now: Self.t1) }
        #expect(retired?.code == .keyRingChangeRefused)
        let primary = #expect(throws: VaultError.self) { try ring.promote(Self.kidA, now: Self.t1) }
        #expect(primary?.code == .keyRingChangeRefused)
        #expect(ring == before)
    }

    /// Retiring an active key works once; retiring it again, or retiring the primary, is refused.
    @Test func retireRules() throws {
        var ring = try Self.sampleRing()
        let primary = #expect(throws: VaultError.self) { try ring.retire(Self.kidA, now: Self.t1) }
        #expect(primary?.code == .keyRingChangeRefused)
        #expect(ring.status(of: Self.kidA) == .primary)

        try ring.add(Self.kidD, now: Self.t0)
        try ring.retire(Self.kidD, now: Self.t1)
        #expect(ring.status(of: Self.kidD) == .retired)
        #expect(ring.entries.first { $0.kid == Self.kidD }?.changed == Self.t1)
        #expect(!ring.openingKids.contains(Self.kidD))
        let twice = #expect(throws: VaultError.self) { try ring.retire(Self.kidD, now: Self.t1) }
        #expect(twice?.code == .keyRingChangeRefused)
        let alreadyRetired = #expect(throws: VaultError.self) { try ring.retire(Self.kidC, now: Self.t1) }
        #expect(alreadyRetired?.code == .keyRingChangeRefused)
    }

    /// Promoting or retiring a kid the ring does not list is KEY_NOT_IN_RING.
    @Test func changesToUnknownKidsAreKeyNotInRing() throws {
        var ring = try Self.sampleRing()
        let promote = #expect(throws: VaultError.self) { try ring.promote(Self.kidD, now: Self.t1) }
        #expect(promote?.code == .keyNotInRing)
        let retire = #expect(throws: VaultError.self) { try ring.retire(Self.kidD, now: Self.t1) }
        #expect(retire?.code == .keyNotInRing)
    }

    /// `checkOpens` accepts primary and active kids, and refuses retired (KEY_RETIRED) and unlisted
    /// (KEY_NOT_IN_RING) ones with the given field.
    @Test func checkOpens() throws {
        let ring = try Self.sampleRing()
        try ring.checkOpens(Self.kidA)
        try ring.checkOpens(Self.kidB)
        let retired = #expect(throws: VaultError.self) { try ring.checkOpens(Self.kidC, field: "kid") }
        #expect(retired?.code == .keyRetired)
        #expect(retired?.field == "kid")
        let unknown = #expect(throws: VaultError.self) { try ring.checkOpens(Self.kidD, field: "envelope.kid") }
        #expect(unknown?.code == .keyNotInRing)
        #expect(unknown?.field == "envelope.kid")
        #expect(KeyRingFile.Status.primary.opens && KeyRingFile.Status.active.opens && !KeyRingFile.Status.retired.opens)
    }
}
