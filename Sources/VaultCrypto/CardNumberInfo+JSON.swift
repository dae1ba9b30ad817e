import CardRules

extension CardNumberInfo {
    /// The metadata as JSON (`vault validate`, `POST /v1/validate`): brand, candidates, length,
    /// luhn, valid, bin, last4, cvc_length, bin_info, errors. Never the number.
    public var json: String {
        func str(_ s: String?) -> String {
            guard let s else { return "null" }
            var out = ""
            JSONText.appendString(s, to: &out)
            return out
        }
        var out = "{\"brand\":\(str(brand?.rawValue))"
        out += ",\"candidates\":[" + candidates.map { str($0.rawValue) }.joined(separator: ",") + "]"
        out += ",\"length\":\(length),\"luhn\":\(luhn),\"valid\":\(valid)"
        out += ",\"bin\":\(str(bin)),\"last4\":\(str(last4))"
        out += ",\"cvc_length\":" + (cvcLength.map(String.init) ?? "null")
        if let b = binInfo {
            out += ",\"bin_info\":{\"range_start\":\(str(b.rangeStart)),\"range_end\":\(str(b.rangeEnd)),\"brand\":\(str(b.brand)),\"type\":\(str(b.type)),\"issuer\":\(str(b.issuer)),\"country\":\(str(b.country))}"
        } else {
            out += ",\"bin_info\":null"
        }
        out += ",\"errors\":[" + errors.map { str($0.rawValue) }.joined(separator: ",") + "]}"
        return out
    }
}
