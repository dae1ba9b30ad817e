import CardRules
import Foundation
import Rewrap
import Store
import Tokenizer
import VaultCrypto
import VaultOpen

/// `vault export` (docs/portability.md): stored cards out of this vault, each sealed to a
/// recipient's public key.
///
/// It runs in the gateway's zone (it opens envelopes). Each card becomes one JSON line: its
/// token (or stored instrument and customer) and metadata, and `"sealed":"vault:v1:<recipient
/// kid>:<base64>"`, the `crypto_box_seal` of the card JSON `{"number","exp_month","exp_year"[,
/// "name"]}` to the recipient's key, which the receiver opens with one `crypto_box_seal_open`
/// (PyNaCl `SealedBox(private_key).decrypt`). Never a CVC.
public struct Exporter: Sendable {
    /// One card to export.
    public struct Item: Sendable, Equatable {
        public enum Kind: String, Sendable { case token, instrument }
        public var kind: Kind
        public var id: String
    }

    /// One stored card as read for export.
    struct Stored: Sendable {
        var item: Item
        var customer: String?
        var envelope: String
        var fingerprint: String?
        var metadata: Metadata
    }

    let opener: EnvelopeOpener
    let recipient: PublicKey
    let workers: Int

    public init(opener: EnvelopeOpener, recipient: PublicKey, workers: Int = ProcessInfo.processInfo.activeProcessorCount) {
        self.opener = opener
        self.recipient = recipient
        self.workers = max(1, workers)
    }

    /// The cards a selection names, checked before anything is written: the live tokens given
    /// (`TOKEN_NOT_FOUND` for one that is not, named by its position only: an id given by mistake
    /// could be a card number), the stored instruments of the customers given
    /// (`CUSTOMER_NOT_FOUND`), or with `all` every live token and stored instrument.
    public static func select(tokens: [String], customers: [String], all: Bool, in db: Database, now: Date) async throws -> [Item] {
        var items: [Item] = []
        if all {
            items += try await db.query("SELECT token FROM vault_tokens WHERE expires_at > ? ORDER BY token", [now]).map {
                (r) throws(StoreError) in Item(kind: .token, id: try r.string(0))
            }
            items += try await db.query("SELECT id FROM vault_instruments ORDER BY customer, created_at, id").map {
                (r) throws(StoreError) in Item(kind: .instrument, id: try r.string(0))
            }
            return items
        }
        var seen = Set<String>()
        for chunk in stride(from: 0, to: tokens.count, by: 500) {
            let part = Array(tokens[chunk..<min(tokens.count, chunk + 500)])
            let live = Set(try await db.query(
                "SELECT token FROM vault_tokens WHERE token IN (\(marks(part.count))) AND expires_at > ?", part.map { $0 as any SQLBindable } + [now]
            ).map { (r) throws(StoreError) in try r.string(0) })
            for (i, t) in part.enumerated() {
                guard live.contains(t) else {
                    throw VaultError(.tokenNotFound, "token \(chunk + i + 1) of those given is not a live token of this store", field: "--token")
                }
                if seen.insert(t).inserted { items.append(Item(kind: .token, id: t)) }
            }
        }
        for chunk in stride(from: 0, to: customers.count, by: 500) {
            let part = Array(customers[chunk..<min(customers.count, chunk + 500)])
            let known = Set(try await db.query("SELECT id FROM vault_customers WHERE id IN (\(marks(part.count)))", part).map {
                (r) throws(StoreError) in try r.string(0)
            })
            if let i = part.firstIndex(where: { !known.contains($0) }) {
                throw VaultError(.customerNotFound, "customer \(chunk + i + 1) of those given is not a customer of this store", field: "--customer")
            }
            items += try await db.query(
                "SELECT id FROM vault_instruments WHERE customer IN (\(marks(part.count))) ORDER BY customer, created_at, id", part
            ).map { (r) throws(StoreError) in Item(kind: .instrument, id: try r.string(0)) }
        }
        return items
    }

    static func marks(_ n: Int) -> String { Array(repeating: "?", count: n).joined(separator: ", ") }

    /// Reads a batch of items' rows (an item gone since `select` is answered `TOKEN_NOT_FOUND`).
    static func read(_ items: [Item], in db: Database) async throws -> [Stored] {
        var byID: [String: Stored] = [:]
        let tokens = items.filter { $0.kind == .token }.map(\.id), instruments = items.filter { $0.kind == .instrument }.map(\.id)
        if !tokens.isEmpty {
            for r in try await db.query("SELECT token, envelope, fingerprint, metadata FROM vault_tokens WHERE token IN (\(marks(tokens.count)))", tokens) {
                let id = try r.string(0)
                byID[id] = Stored(
                    item: Item(kind: .token, id: id), customer: nil, envelope: try r.string(1), fingerprint: r.optionalString(2),
                    metadata: try Metadata(column: r.optionalString(3)))
            }
        }
        if !instruments.isEmpty {
            for r in try await db.query(
                "SELECT id, customer, envelope, fingerprint FROM vault_instruments WHERE id IN (\(marks(instruments.count)))", instruments)
            {
                let id = try r.string(0)
                byID[id] = Stored(
                    item: Item(kind: .instrument, id: id), customer: try r.string(1), envelope: try r.string(2), fingerprint: r.optionalString(3),
                    metadata: Metadata())
            }
        }
        return try items.map { (item) throws(VaultError) in
            guard let s = byID[item.id] else { throw VaultError(.tokenNotFound, "a selected card was deleted during the export", field: item.kind.rawValue) }
            return s
        }
    }

    /// One exported line (no newline) and the envelope's id, or the error of a card that does
    /// not open.
    public struct Line: Sendable {
        public var item: Item
        public var customer: String?
        public var envelopeID: String
        public var text: String
    }

    /// Reads and exports a batch, the crypto spread over the workers; stops at the first card
    /// that does not open (its code: `KEY_MISMATCH` without its secret key, the envelope codes).
    public func export(_ items: [Item], in db: Database) async throws -> [Line] {
        let rows = try await Self.read(items, in: db)
        let results = parallelMap(rows, workers: workers, placeholder: Result<Line, VaultError>.failure(VaultError(.envelopeMalformed, "not read"))) {
            row in Result { () throws(VaultError) in try line(row) }
        }
        return try results.map { (r) throws(VaultError) in try r.get() }
    }

    /// Opens one stored envelope (the metadata checked) and writes its line.
    func line(_ s: Stored) throws(VaultError) -> Line {
        let envelope = try CardEnvelope(json: s.envelope)
        let opened = try opener.open(envelope)
        // Never the CVC: none is stored, and one would not be exported if it were.
        let card = try CardData(number: opened.card.number, expiry: opened.card.expiry, cvc: nil, name: opened.card.name)
        let sealed = SecureBytes(capacity: CardJSONWriter.maxBytes) { CardJSONWriter.write(card, into: $0) }.withUnsafeBytes { recipient.seal($0) }
        let m = envelope.card
        var out = "{"
        out += s.item.kind == .token ? "\"token\":" : "\"instrument\":"
        JSONText.appendString(s.item.id, to: &out)
        if let customer = s.customer { out += ",\"customer\":"; JSONText.appendString(customer, to: &out) }
        out += ",\"brand\":"
        JSONText.appendString(m.brand.rawValue, to: &out)
        // The visible prefix only (DESIGN §1): the export's metadata leaves the gateway zone.
        out += ",\"bin\":\"\(CardNumberInfo.visiblePrefix(m.bin, length: m.length))\",\"last4\":\"\(m.last4)\",\"length\":\(m.length),\"exp_month\":\(m.expMonth),\"exp_year\":\(m.expYear)"
        if let fp = s.fingerprint { out += ",\"fingerprint\":"; JSONText.appendString(fp, to: &out) }
        if !s.metadata.isEmpty {
            out += ",\"metadata\":{"
            for (i, pair) in s.metadata.sorted.enumerated() {
                if i > 0 { out += "," }
                JSONText.appendString(pair.key, to: &out)
                out += ":"
                JSONText.appendString(pair.value, to: &out)
            }
            out += "}"
        }
        out += ",\"sealed\":\"" + sealed.text + "\"}"
        return Line(item: s.item, customer: s.customer, envelopeID: envelope.id, text: out)
    }
}
