// What a token answer costs to write (README "Answers"): the hand-built string of earlier
// versions, the `Answer.Token` model through `AnswerJSON` (the real Sources/SocketHTTP/AnswerJSON.swift
// and Sources/VaultCrypto/Metadata.swift, compiled in with `swiftc -O`), and Foundation's
// `JSONEncoder` (one reused instance). Run: scripts/answer-bench/run
import Foundation

struct Card: Encodable { let brand: String, bin: String, last4: String, length: Int, exp_month: Int, exp_year: Int, fingerprint: String? }
/// The shape of `Answer.Token`.
struct Token: Encodable {
    let token: String, card: Card, expires_at: String, cvc_expires_at: OrNull<String>, has_cvc: Bool, single_use: Bool, metadata: Metadata
}

func quoted(_ s: String, _ out: inout String) { out += "\""; out += s; out += "\"" }
/// The hand-built token answer of earlier versions.
func handBuilt(_ t: Token) -> String {
    var out = "{\"token\":\"\(t.token)\",\"card\":{\"brand\":"
    quoted(t.card.brand, &out); out += ",\"bin\":"; quoted(t.card.bin, &out); out += ",\"last4\":"; quoted(t.card.last4, &out)
    out += ",\"length\":\(t.card.length),\"exp_month\":\(t.card.exp_month),\"exp_year\":\(t.card.exp_year)"
    if let f = t.card.fingerprint { out += ",\"fingerprint\":"; quoted(f, &out) }
    out += "},\"expires_at\":\"\(t.expires_at)\",\"cvc_expires_at\":" + (t.cvc_expires_at.value.map { "\"\($0)\"" } ?? "null")
    out += ",\"has_cvc\":\(t.has_cvc),\"single_use\":\(t.single_use),\"metadata\":{}}"
    return out
}

let t = Token(
    token: "tok_a5cnbzpycvkso2dlq7hr6mq5va",
    card: Card(brand: "visa", bin: "42424242", last4: "4242", length: 16, exp_month: 12, exp_year: 2030, fingerprint: String(repeating: "a", count: 64)),
    expires_at: "2026-11-23T12:50:59Z", cvc_expires_at: OrNull("2026-11-23T12:40:59Z"), has_cvc: true, single_use: true, metadata: Metadata())
precondition(handBuilt(t) == AnswerJSON.encode(t), "the model writes what the hand-built string wrote")
let encoder = JSONEncoder()
let n = 200_000
var sink = 0
func measure(_ name: String, _ body: () -> Int) {
    for _ in 0..<10_000 { sink &+= body() }
    let start = ContinuousClock.now
    for _ in 0..<n { sink &+= body() }
    let each = (ContinuousClock.now - start) / n
    print("\(name): \((Double(each.components.attoseconds) / 1e12 * 100).rounded() / 100) µs per token answer (\(n) iterations)")
}
measure("hand-built string") { handBuilt(t).utf8.count }
measure("AnswerJSON (Answer.Token)") { AnswerJSON.encode(t).utf8.count }
measure("JSONEncoder (one instance)") { (try? encoder.encode(t).count) ?? 0 }
print("(\(sink % 2))")
