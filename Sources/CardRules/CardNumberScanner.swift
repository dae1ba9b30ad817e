/// Finds a card number inside free text (an idempotency key, a merchant's reference, a
/// description), so a field that is not a card field can refuse one instead of storing it in clear.
///
/// What it looks for: a run of 12 to 19 ASCII digits that passes the Luhn check and does not start
/// with `0` (ISO/IEC 7812 gives issuer numbers no major industry identifier 0), whether the digits
/// are written together (`x4242424242424242y`: letters around them do not matter) or in groups
/// joined by separators (`4242 4242 4242 4242`, `4242-4242-4242-4242`, `3782.822463.10005`,
/// `4242_4242_4242_4242`, `4242/4242/4242/4242`).
///
/// The rules that keep ordinary ids from being taken for card numbers:
/// - Digits are split into groups at every other byte. Two groups belong to one candidate only
///   when 1 to 3 separator bytes (space, tab, `-`, `.`, `_`, `/`) lie between them.
/// - In a candidate of several groups every group has at least 3 digits: card numbers are written
///   in fours (or 4-6-5, 4-6-4, 4-4-4-4-3); dates and counters such as `2024-11-24` or `v1.2.3`
///   have groups of 1 or 2 digits, which end a candidate. So `order-2024-11-24-0001` is not a card
///   number (no 12 digits in a row of long groups), while `4242 4242 4242 4242 12/30` still is.
/// - A canonical UUID (8-4-4-4-12 hex) is skipped whole: it is an id, and its all-digit segments
///   would pass the Luhn check about once in a thousand random UUIDs.
/// - Several groups make a candidate only as whole tokens: the first may not follow a letter and
///   the last may not be followed by one, so the hex segments of a UUID
///   (`e9b7a681-2795-4000-9495-855f514e7d0f`: `681 2795 4000 9495` would pass the Luhn check) are
///   not read as a grouped card number. A single unbroken run is checked whatever surrounds it.
/// - A candidate is checked at group boundaries only: every run of whole consecutive groups with
///   12 to 19 digits in all. A single unbroken run of digits is checked as a whole (12 to 19
///   digits), not window by window: a 30-digit number is not searched for a card inside it.
///
/// With those rules a random 12-to-19-digit id still has one chance in ten of passing the Luhn
/// check, which is why free-text fields should not carry long bare numbers.
///
/// The digits are never copied: the Luhn sum is computed in place, and the answer is only a Bool.
public enum CardNumberScanner {
    /// Fewest and most digits of a card number looked for.
    public static let minDigits = 12
    public static let maxDigits = 19

    /// True when `text` holds something that looks like a card number (see the type's rules).
    public static func containsCardNumber(_ text: String) -> Bool {
        var copy = text
        return copy.withUTF8 { containsCardNumber(UnsafeRawBufferPointer($0)) }
    }

    /// True when the UTF-8 (or ASCII) bytes hold something that looks like a card number.
    public static func containsCardNumber(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // Groups of the current candidate: (start, length) of each run of digits.
        var groups: [(start: Int, count: Int)] = []
        groups.reserveCapacity(8)
        var i = 0
        let n = bytes.count
        // Separator bytes seen since the last group, or nil once something else broke the chain.
        var gap: Int? = 0
        while i < n {
            let b = bytes[i]
            if isUUID(at: i, bytes) {
                // A UUID (8-4-4-4-12 hex) is an id, not a card number: its all-digit segments
                // would otherwise pass the Luhn check about once in a thousand random UUIDs.
                if check(groups, bytes) { return true }
                groups = []
                gap = nil
                i += 36
                continue
            }
            if Digits.isDigit(b) {
                var j = i
                while j < n, Digits.isDigit(bytes[j]) { j += 1 }
                let group = (start: i, count: j - i)
                if let g = gap, g >= 1, g <= 3, let last = groups.last, last.count >= 3, group.count >= 3 {
                    groups.append(group)
                } else {
                    if check(groups, bytes) { return true }
                    groups = [group]
                }
                gap = 0
                i = j
            } else if isSeparator(b) {
                gap = gap.map { $0 + 1 }
                i += 1
            } else {
                gap = nil
                i += 1
            }
        }
        return check(groups, bytes)
    }

    /// A canonical UUID (8-4-4-4-12 hex digits, either case) starts at `i` and stands alone (no
    /// letter or digit just before or after it).
    static func isUUID(at i: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard i + 36 <= bytes.count else { return false }
        if i > 0, isLetter(bytes[i - 1]) || Digits.isDigit(bytes[i - 1]) { return false }
        if i + 36 < bytes.count, isLetter(bytes[i + 36]) || Digits.isDigit(bytes[i + 36]) { return false }
        for k in 0..<36 {
            let c = bytes[i + k]
            if k == 8 || k == 13 || k == 18 || k == 23 {
                guard c == 0x2D else { return false }
            } else {
                guard Digits.isDigit(c) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66) else { return false }
            }
        }
        return true
    }

    /// Space, tab, `-`, `.`, `_`, `/`.
    static func isSeparator(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x2F
    }

    /// Whether some run of whole consecutive groups has 12 to 19 digits, does not start with 0
    /// and passes the Luhn check.
    private static func check(_ groups: [(start: Int, count: Int)], _ bytes: UnsafeRawBufferPointer) -> Bool {
        for first in groups.indices {
            guard bytes[groups[first].start] != Digits.zero else { continue }
            var total = 0
            for last in first..<groups.count {
                total += groups[last].count
                if total > maxDigits { break }
                // Several groups count only as whole tokens: a digit run glued to letters, like the
                // ends of a UUID's segments (`…a681-2795-4000-9495-855f…`), is not a card group.
                if first < last, !(standsAlone(before: groups[first].start, bytes) && standsAlone(after: groups[last].start + groups[last].count, bytes)) {
                    continue
                }
                if total >= minDigits, luhn(groups[first...last], bytes) { return true }
            }
        }
        return false
    }

    /// Whether the byte before `index` (or the one at `end`) is not a letter: the group is not the
    /// tail (or head) of an alphanumeric word.
    private static func standsAlone(before index: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        index == 0 || !isLetter(bytes[index - 1])
    }

    private static func standsAlone(after end: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        end >= bytes.count || !isLetter(bytes[end])
    }

    private static func isLetter(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A }

    /// The Luhn check over the digits of `groups`, read in place from the right.
    private static func luhn(_ groups: ArraySlice<(start: Int, count: Int)>, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var total = 0, double = false
        for g in groups.reversed() {
            var k = g.start + g.count - 1
            while k >= g.start {
                var d = Int(bytes[k] &- Digits.zero)
                if double {
                    d *= 2
                    if d > 9 { d -= 9 }
                }
                total += d
                double.toggle()
                k -= 1
            }
        }
        return total % 10 == 0
    }
}
