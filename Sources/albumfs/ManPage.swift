import Glibc

/// `albumfs manpage TEMPLATE` (hidden; scripts/install runs it): the man page
/// is TEMPLATE (dist/albumfs.1.in) with its `@SYNOPSIS@` line replaced by
/// the synopsis of the command table, the one the usage text shows, in troff.
enum ManPage {
    static func print(template arguments: [String]) throws(CommandFailure) -> Int32 {
        guard arguments.count == 1 else { throw .usage("manpage: expected the template's path") }
        guard let file = fopen(arguments[0], "r") else {
            throw CommandFailure(.usage, "manpage: cannot read \(arguments[0]): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        while getline(&line, &capacity, file) >= 0, let line {
            let text = String(cString: line)
            Swift.print(text == "@SYNOPSIS@\n" ? troff(CommandLineInterface.synopsis) : text, terminator: text == "@SYNOPSIS@\n" ? "\n" : "")
        }
        free(line)
        return ExitCode.success.rawValue
    }

    /// Each form as a troff line of its own: `albumfs` and command words
    /// bold, options bold, METAVARIABLES italic, brackets and bars roman;
    /// the usage text's remarks in parentheses left out.
    static func troff(_ forms: [String]) -> String {
        forms.map { form in
            var bare = Substring(form)
            if let remark = form.firstIndex(of: "("), form[..<remark].hasSuffix("  ") { bare = form[..<remark] }
            while bare.last == " " { bare.removeLast() }
            var out = "\\fBalbumfs\\fR"
            var word = ""
            func flush() {
                guard !word.isEmpty else { return }
                let escaped = word.map { $0 == "-" ? "\\-" : String($0) }.joined()
                let metavariable = word.allSatisfy { $0.isUppercase || $0 == "…" || $0.isNumber }
                out += metavariable ? "\\fI\(escaped)\\fR" : "\\fB\(escaped)\\fR"
                word = ""
            }
            for character in " " + bare {
                if character.isLetter || character.isNumber || "-._".contains(character) {
                    word.append(character)
                } else {
                    flush()
                    out.append(character == "…" ? "..." : String(character))
                }
            }
            flush()
            return out
        }.joined(separator: "\n.br\n")
    }
}
