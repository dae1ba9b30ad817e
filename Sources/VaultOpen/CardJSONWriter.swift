import VaultCrypto

/// Writes an opened card as JSON straight into wiped memory: `{"number","exp_month","exp_year","cvc","name"}`
/// (`vault open --card`; without its CVC, the card `vault export` seals to a recipient).
public enum CardJSONWriter {
    /// Enough for any card (a 256-byte name escaped to \uXXXX is 1536 bytes).
    public static let maxBytes = 2048

    public static func write(_ card: CardData, into out: UnsafeMutableRawBufferPointer) -> Int {
        // The opener has bounded every field (name ≤ 256 bytes, pan ≤ 19, cvc ≤ 4): the worst
        // case is 256 × 6 + 128 bytes. Check anyway, before writing a byte.
        let worst = 128 + card.number.count + (card.cvc?.count ?? 0) + (card.name?.count ?? 0) * 6
        precondition(worst <= out.count, "card JSON would not fit its buffer")
        var at = 0
        func put(_ s: StaticString) {
            let n = s.utf8CodeUnitCount
            UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + n)]).copyMemory(from: UnsafeRawBufferPointer(start: s.utf8Start, count: n))
            at += n
        }
        func putDecimal(_ v: Int) {
            for b in String(v).utf8 { out[at] = b; at += 1 }
        }
        func putString(_ bytes: SecureBytes) {
            out[at] = 34; at += 1
            bytes.withUnsafeBytes { b in
                for c in b {
                    switch c {
                    case 34, 92: out[at] = 92; out[at + 1] = c; at += 2
                    case 0..<0x20:
                        let hex: [UInt8] = Array("0123456789abcdef".utf8)
                        for h in [92, 117, 48, 48, hex[Int(c >> 4)], hex[Int(c & 15)]] as [UInt8] { out[at] = h; at += 1 }
                    default: out[at] = c; at += 1
                    }
                }
            }
            out[at] = 34; at += 1
        }
        put("{\"number\":")
        putString(card.number)
        put(",\"exp_month\":")
        putDecimal(card.expiry.month)
        put(",\"exp_year\":")
        putDecimal(card.expiry.year)
        if let cvc = card.cvc { put(",\"cvc\":"); putString(cvc) }
        if let name = card.name { put(",\"name\":"); putString(name) }
        put("}")
        return at
    }
}
