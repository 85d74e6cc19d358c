/// Walks an argument list: flags, `--name VALUE`/`--name=VALUE`, `-oVALUE`/`-o VALUE`.
struct ArgumentReader {
    private var remaining: [String]
    init(_ arguments: [String]) { remaining = arguments }

    mutating func next() -> String? {
        remaining.isEmpty ? nil : remaining.removeFirst()
    }

    /// The value of option `name` given as `argument` (`--store=x`) or as the next argument.
    mutating func value(of name: String, in argument: String) throws(CommandFailure) -> String {
        if argument.count > name.count {
            let value = argument.dropFirst(name.count)
            return String(value.hasPrefix("=") ? value.dropFirst() : value)
        }
        guard let value = next() else { throw .usage("\(name) needs a value") }
        return value
    }
}
