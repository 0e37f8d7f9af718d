"""One split of a document, shared by every rule suite and by MinHash shingling.

datatrove splits the text into words with spaCy's blank English tokenizer inside every filter
(Gopher repetition, Gopher quality, FineWeb) and again for MinHash: about 80% of its filter time.
`split_text` does it once. Its word split is a port of spaCy 3.8's tokenizer (the affix loop
`Tokenizer._split_affixes`, `_attach_tokens` and the special-case pass `_apply_special_cases`)
with the English prefix, suffix and infix rules, URL match and tokenizer exceptions, so "don't"
gives "do", "n't", "(e.g." gives "(", "e.g." and a URL stays whole. The port runs once per
distinct whitespace-separated chunk (results are cached; the common case costs one dict look-up
per chunk). One known difference: spaCy's special-case pass can match an emoticon across a space
(": (" looks like ":(") and then, finding no rule for the spaced text, leaves the tokens as they
were, which can block a match inside the next chunk; per-chunk work cannot see that.

Languages written without spaces pass a segmenter (`curation.segmenters`): the chunks in its
script become its words, every other chunk keeps the English split, and each segmenter keeps a
vocabulary of its own.
"""

from __future__ import annotations

import hashlib
import unicodedata
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

import numpy as np
import regex

from curation.segmenters import SEGMENTERS, load_segmenter

# --- constants shared with the rule suites ---------------------------------------------------

# datatrove.utils.text.PUNCTUATION and TERMINAL_PUNCTUATION (datatrove 0.10): a word made only of
# these is a "symbol word" for Gopher; a line ending in a terminal mark counts for FineWeb.
PUNCTUATION = (
    "!/\u2014\u201d:\uff05\uff11\u3008&(\u3001\u2501\\\u3010#%\u300c\u300d\uff0c\u3011\uff1b+^]~"
    "\u201c\u300a\u201e';\u2019{|\u2236\xb4[=-`*\uff0e\uff08\u2013\uff1f\uff01\uff1a$\uff5e\xab"
    '\u3009,><\u300b)?\uff09\u3002\u2026@_."}\u25ba\xbb'
    + "".join(map(chr, (*range(0, 9), *range(11, 32), *range(127, 160))))
)
_SENTENCE_END = (  # spaCy's Sentencizer.default_punct_chars
    "!.?\u0589\u061f\u06d4\u0700\u0701\u0702\u07f9\u0964\u0965\u104a\u104b\u1362\u1367\u1368"
    "\u166e\u1735\u1736\u1803\u1809\u1944\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b\u1b5e\u1b5f"
    "\u1c3b\u1c3c\u1c7e\u1c7f\u203c\u203d\u2047\u2048\u2049\u2e2e\u2e3c\ua4ff\ua60e\ua60f\ua6f3"
    "\ua6f7\ua876\ua877\ua8ce\ua8cf\ua92f\ua9c8\ua9c9\uaa5d\uaa5e\uaa5f\uaaf0\uaaf1\uabeb\ufe52"
    "\ufe56\ufe57\uff01\uff0e\uff1f\U00010a56\U00010a57\U00011047\U00011048\U000110be\U000110bf"
    "\U000110c0\U000110c1\U00011141\U00011142\U00011143\U000111c5\U000111c6\U000111cd\U000111de"
    "\U000111df\U00011238\U00011239\U0001123b\U0001123c\U000112a9\U0001144b\U0001144c\U000115c2"
    "\U000115c3\U000115c9\U000115ca\U000115cb\U000115cc\U000115cd\U000115ce\U000115cf\U000115d0"
    "\U000115d1\U000115d2\U000115d3\U000115d4\U000115d5\U000115d6\U000115d7\U00011641\U00011642"
    "\U0001173c\U0001173d\U0001173e\U00011a42\U00011a43\U00011a9b\U00011a9c\U00011c41\U00011c42"
    "\U00016a6e\U00016a6f\U00016af5\U00016b37\U00016b38\U00016b44\U0001bc9f\U0001da88\uff61\u3002"
)
TERMINAL_PUNCTUATION = frozenset(
    _SENTENCE_END
    + "\u061d\u061e\u0837\u0839\u083d\u083e\u17d4\u17d5\u17d6\u17d9\u17da\u1b7d\u1b7e\u2e53"
    "\u2e54\U00010f55\U00010f56\U00010f57\U00010f58\U00010f59\U00010f86\U00010f87\U00010f88"
    "\U00010f89\U00011944\U00011946\U00011ef7\U00011ef8\U00011f43\U00011f44\U00016e98"
)
_PUNCTUATION_SET = frozenset(PUNCTUATION) | TERMINAL_PUNCTUATION
_SENTENCE_END_SET = frozenset(_SENTENCE_END)

# --- spaCy's English affix rules (spacy/lang/char_classes.py, punctuation.py, en/) -----------

# spaCy's letter and symbol classes, as the code point ranges its hand-written lists cover.
_ALPHA = (
    "\u0041-\u005a\u0061-\u007a\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01bf\u01c4-\u02af\u0386"
    "\u0388-\u038a\u038c\u038e-\u038f\u0391-\u03a9\u03ac-\u03af\u03b1-\u03c9\u03cc-\u03ce"
    "\u0400-\u0401\u0403-\u040a\u040c-\u040d\u0410-\u0451\u0453-\u045a\u045c-\u045d\u0490-"
    "\u0491\u0496-\u0497\u04a2-\u04a3\u04ae-\u04af\u04ba-\u04bb\u04d8-\u04d9\u04e8-\u04e9"
    "\u0591-\u05f4\u0620-\u064a\u066e-\u06d5\u06e5-\u06ff\u0750-\u077f\u08a0-\u08bd\u0900-"
    "\u09ff\u0b80-\u0cff\u0d80-\u0dff\u1100-\u137f\u1d00-\u1d25\u1d6b-\u1d77\u1d79-\u1d9a"
    "\u1e00-\u1eff\u2c60-\u2c7b\u2c7e-\u2c7f\u2e80-\u2fdf\u2ff0-\u30ff\u31c0-\u31ef\u3200-"
    "\u4dbf\u4e00-\u9fff\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\ua790-\ua7b9\ua7fa\uab30-"
    "\uab5a\uab60-\uab64\uac00-\ud7af\uf900-\ufaff\ufb1d-\ufbb1\ufbd3-\ufd3d\ufd50-\ufdc7"
    "\ufdf0-\ufdfb\ufe30-\ufe4f\ufe70-\ufefc\uff21-\uff3a\uff41-\uff5a\U0001ee00-\U0001eebb"
    "\U0001f200-\U0001f2ff\U00020000-\U0002a6df\U0002a700-\U0002ebef\U0002f800-\U0002fa1f"
)
_UNCASED = (
    "\u0591-\u05f4\u0620-\u064a\u066e-\u06d5\u06e5-\u06ff\u0750-\u077f\u08a0-\u08bd\u0900-"
    "\u09ff\u0b80-\u0cff\u0d80-\u0dff\u1100-\u137f\u2e80-\u2fdf\u2ff0-\u30ff\u31c0-\u31ef"
    "\u3200-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\ufb1d-\ufbb1\ufbd3-\ufd3d\ufd50-"
    "\ufdc7\ufdf0-\ufdfb\ufe30-\ufe4f\ufe70-\ufefc\U0001ee00-\U0001eebb\U0001f200-\U0001f2ff"
    "\U00020000-\U0002a6df\U0002a700-\U0002ebef\U0002f800-\U0002fa1f"
)
_ICONS = (
    "\u00a6\u00a9\u00ae\u00b0\u0482\u058d-\u058e\u060e-\u060f\u06de\u06e9\u06fd-\u06fe\u07f6"
    "\u09fa\u0b70\u0bf3-\u0bf8\u0bfa\u0c7f\u0d4f\u0d79\u0f01-\u0f03\u0f13\u0f15-\u0f17\u0f1a-"
    "\u0f1f\u0f34\u0f36\u0f38\u0fbe-\u0fc5\u0fc7-\u0fcc\u0fce-\u0fcf\u0fd5-\u0fd8\u109e-"
    "\u109f\u1390-\u1399\u1940\u19de-\u19ff\u1b61-\u1b6a\u1b74-\u1b7c\u2100-\u2101\u2103-"
    "\u2106\u2108-\u2109\u2114\u2116-\u2117\u211e-\u2123\u2125\u2127\u2129\u212e\u213a-\u213b"
    "\u214a\u214c-\u214d\u214f\u218a-\u218b\u2195-\u2199\u219c-\u219f\u21a1-\u21a2\u21a4-"
    "\u21a5\u21a7-\u21ad\u21af-\u21cd\u21d0-\u21d1\u21d3\u21d5-\u21f3\u2300-\u2307\u230c-"
    "\u231f\u2322-\u2328\u232b-\u237b\u237d-\u239a\u23b4-\u23db\u23e2-\u2426\u2440-\u244a"
    "\u249c-\u24e9\u2500-\u25b6\u25b8-\u25c0\u25c2-\u25f7\u2600-\u266e\u2670-\u2767\u2794-"
    "\u27bf\u2800-\u28ff\u2b00-\u2b2f\u2b45-\u2b46\u2b4d-\u2b73\u2b76-\u2b95\u2b98-\u2bc8"
    "\u2bca-\u2bfe\u2ce5-\u2cea\u2e80-\u2e99\u2e9b-\u2ef3\u2f00-\u2fd5\u2ff0-\u2ffb\u3004"
    "\u3012-\u3013\u3020\u3036-\u3037\u303e-\u303f\u3190-\u3191\u3196-\u319f\u31c0-\u31e3"
    "\u3200-\u321e\u322a-\u3247\u3250\u3260-\u327f\u328a-\u32b0\u32c0-\u32fe\u3300-\u33ff"
    "\u4dc0-\u4dff\ua490-\ua4c6\ua828-\ua82b\ua836-\ua837\ua839\uaa77-\uaa79\ufdfd\uffe4"
    "\uffe8\uffed-\uffee\ufffc-\ufffd\U00010137-\U0001013f\U00010179-\U00010189\U0001018c-"
    "\U0001018e\U00010190-\U0001019b\U000101a0\U000101d0-\U000101fc\U00010877-\U00010878"
    "\U00010ac8\U0001173f\U00016b3c-\U00016b3f\U00016b45\U0001bc9c\U0001d000-\U0001d0f5"
    "\U0001d100-\U0001d126\U0001d129-\U0001d164\U0001d16a-\U0001d16c\U0001d183-\U0001d184"
    "\U0001d18c-\U0001d1a9\U0001d1ae-\U0001d1e8\U0001d200-\U0001d241\U0001d245\U0001d300-"
    "\U0001d356\U0001d800-\U0001d9ff\U0001da37-\U0001da3a\U0001da6d-\U0001da74\U0001da76-"
    "\U0001da83\U0001da85-\U0001da86\U0001ecac\U0001f000-\U0001f02b\U0001f030-\U0001f093"
    "\U0001f0a0-\U0001f0ae\U0001f0b1-\U0001f0bf\U0001f0c1-\U0001f0cf\U0001f0d1-\U0001f0f5"
    "\U0001f110-\U0001f16b\U0001f170-\U0001f1ac\U0001f1e6-\U0001f202\U0001f210-\U0001f23b"
    "\U0001f240-\U0001f248\U0001f250-\U0001f251\U0001f260-\U0001f265\U0001f300-\U0001f3fa"
    "\U0001f400-\U0001f6d4\U0001f6e0-\U0001f6ec\U0001f6f0-\U0001f6f9\U0001f700-\U0001f773"
    "\U0001f780-\U0001f7d8\U0001f800-\U0001f80b\U0001f810-\U0001f847\U0001f850-\U0001f859"
    "\U0001f860-\U0001f887\U0001f890-\U0001f8ad\U0001f900-\U0001f90b\U0001f910-\U0001f93e"
    "\U0001f940-\U0001f970\U0001f973-\U0001f976\U0001f97a\U0001f97c-\U0001f9a2\U0001f9b0-"
    "\U0001f9b9\U0001f9c0-\U0001f9c2\U0001f9d0-\U0001f9ff\U0001fa60-\U0001fa6d"
)
# Lower and upper case: the cased letters among them (with spaCy's IPA letters), plus the
# uncased scripts, which spaCy counts as both.
_LOWER_CHAR = (
    rf"(?:(?=[{_ALPHA}])\p{{Ll}}|[{_UNCASED}\u0250-\u02AF\u1D00-\u1D25\u1D6B-\u1D77\u1D79-\u1D9A])"
)
_UPPER_CHAR = rf"(?:(?=[{_ALPHA}])\p{{Lu}}|[{_UNCASED}\u03A2])"
_PUNCT = (
    r"… …… , : ; \! \? ¿ ؟ ¡ \( \) \[ \] \{ \} < > _ # \* & "
    r"。 ？ ！ ， 、 ； ： ～ · । ، ۔ ؛ ٪"
)
_QUOTES = r"\' \" ” “ ` ‘ ´ ’ ‚ , „ » « 「 」 『 』 （ ） 〔 〕 【 】 《 》 〈 〉 〈 〉  ⟦ ⟧"
_HYPHENS = "- – — -- --- —— ~"
_UNITS = (
    "km km² km³ m m² m³ dm dm² dm³ cm cm² cm³ mm mm² mm³ ha µm nm yd in ft kg g mg µg t lb oz "
    "m/s km/h kmh mph hPa Pa mbar mb MB kb KB gb GB tb TB T G M K % км км² км³ м м² м³ дм дм² "
    "дм³ см см² см³ мм мм² мм³ нм кг г мг м/с км/ч кПа Па мбар Кб КБ кб Мб МБ мб Гб ГБ гб Тб ТБ "
    "тбكم كم² كم³ م م² م³ سم سم² سم³ مم مم² مم³ كم غرام جرام جم كغ ملغ كوب اكواب"
)
_CURRENCY = (
    r"\$ £ € ¥ ฿ US\$ C\$ A\$ ₽ ﷼ ₴ ₠ ₡ ₢ ₣ ₤ ₥ ₦ ₧ ₨ ₩ ₪ ₫ € ₭ ₮ ₯ ₰ ₱ ₲ ₳ ₴ ₵ ₶ ₷ ₸ ₹ ₺ ₻ ₼ ₽ ₾ ₿"
)


def _split(chars: str) -> list[str]:
    return chars.strip().split(" ")


def _merge(chars: str) -> str:
    return chars.strip().replace(" ", "|")


def _group(chars: str) -> str:
    return chars.strip().replace(" ", "")


_ELLIPSES = [r"\.\.+", "…"]
_ICON_LIST = [f"[{_ICONS}]"]
_QUOTE_CLASS = _group(_QUOTES)
_PREFIXES = (
    ["§", "%", "=", "—", "–", r"\+(?![0-9])"]
    + _split(_PUNCT)
    + _ELLIPSES
    + _split(_QUOTES)
    + _split(_CURRENCY)
    + _ICON_LIST
)


def _last_chars(items: str) -> str:
    return "".join(item[-1] for item in _split(items) if item)


# Each suffix rule with the characters it can end with (None: any of the icons) and whether it
# is a plain string; `_suffix_length` runs only the rules that can end a given chunk.
_SUFFIX_RULES: list[tuple[str, str | None, bool]] = (
    [
        (rule, rule[-1], True)
        for rule in _split(_PUNCT) + ["…"] + _split(_QUOTES) + ["'s", "'S", "’s", "’S", "—", "–"]
        if rule
    ]
    + [(r"\.\.+", ".", False), (_ICON_LIST[0], None, False)]
    + [
        (r"(?<=[0-9])\+", "+", False),
        (r"(?<=°[FfCcKk])\.", ".", False),
        (rf"(?<=[0-9])(?:{_merge(_CURRENCY)})", _last_chars(_CURRENCY), False),
        (rf"(?<=[0-9])(?:{_merge(_UNITS)})", _last_chars(_UNITS), False),
        # The class below is spaCy's, quirks included: "(?:" and "|" are literal there.
        (rf"(?<=[0-9%²\-\+{_merge(_PUNCT)}(?:{_QUOTE_CLASS})]|{_LOWER_CHAR})\.", ".", False),
        (rf"(?<={_UPPER_CHAR}{_UPPER_CHAR})\.", ".", False),
    ]
)
_SUFFIXES = [rule for rule, _, _ in _SUFFIX_RULES]
_INFIXES = (
    _ELLIPSES
    + _ICON_LIST
    + [
        r"(?<=[0-9])[+\-\*^](?=[0-9-])",
        rf"(?<=[{_QUOTE_CLASS}]|{_LOWER_CHAR})\.(?=[{_QUOTE_CLASS}]|{_UPPER_CHAR})",
        rf"(?<=[{_ALPHA}]),(?=[{_ALPHA}])",
        rf"(?<=[{_ALPHA}0-9])(?:{_merge(_HYPHENS)})(?=[{_ALPHA}])",
        rf"(?<=[{_ALPHA}0-9])[:<>=/](?=[{_ALPHA}])",
    ]
)
_PREFIX_MATCH = regex.compile("|".join("^" + p for p in _PREFIXES if p.strip())).match
_SUFFIX_SEARCH = regex.compile("|".join(p + "$" for p in _SUFFIXES if p.strip())).search
_INFIX_MATCH = regex.compile("|".join(p for p in _INFIXES if p.strip())).match
# spaCy's URL_MATCH (spacy/lang/tokenizer_exceptions.py): a URL or e-mail address stays whole.
# Its user-info part "\S+(?::\S*)?@" is written "\S+@", the same language (":" is "\S"), because
# the original backtracks quadratically on long chunks full of colons.
_URL_MATCH = regex.compile(
    r"(?u)^(?:(?:[\w\+\-\.]{2,})://)?(?:\S+@)?(?:"
    r"(?!(?:10|127)(?:\.\d{1,3}){3})(?!(?:169\.254|192\.168)(?:\.\d{1,3}){2})"
    r"(?!172\.(?:1[6-9]|2\d|3[0-1])(?:\.\d{1,3}){2})"
    r"(?:[1-9]\d?|1\d\d|2[01]\d|22[0-3])(?:\.(?:1?\d{1,2}|2[0-4]\d|25[0-5])){2}"
    r"(?:\.(?:[1-9]\d?|1\d\d|2[0-4]\d|25[0-4]))"
    r"|(?:(?:[A-Za-z0-9\u00a1-\uffff][A-Za-z0-9\u00a1-\uffff_-]{0,62})?[A-Za-z0-9\u00a1-\uffff]\.)+"
    rf"(?:{_LOWER_CHAR}{{2,63}}))(?::\d{{2,5}})?(?:[/?#]\S*)?$"
).match


# --- spaCy's English tokenizer exceptions (spacy/lang/en/tokenizer_exceptions.py) ------------

_EMOTICONS = r"""
:) :-) :)) :-)) :))) :-))) (: (-: =) (= :] :-] [: [-: [= =] :o) (o: :} :-} 8) 8-) (-8 ;) ;-) (;
(-; :( :-( :(( :-(( :((( :-((( ): )-: =( >:( :') :'-) :'( :'-( :/ :-/ =/ =| :| :-| ]= =[ :1 :P
:-P :p :-p :O :-O :o :-o :0 :-0 :() >:o :* :-* :3 :-3 =3 :> :-> :X :-X :x :-x :D :-D ;D ;-D =D
xD XD xDD XDD 8D 8-D ^_^ ^__^ ^___^ >.< >.> <.< ._. ;_; -_- -__- v.v V.V v_v V_V o_o o_O O_o O_O
0_o o_0 0_0 o.O O.o O.O o.o 0.0 o.0 0.o @_@ <3 <33 <333 </3 (^_^) (-_-) (._.) (>_<) (*_*) (¬_¬)
ಠ_ಠ ಠ︵ಠ (ಠ_ಠ) ¯\(ツ)/¯ (╯°□°）╯︵┻━┻ ><(((*>
"""
_SINGLE_TOKENS = (
    "\\t \\n \u2014 ' \\\") <space> '' C++ 'S 's \u2018S \u2018s and/or w/o 're "
    "'Cause 'cause 'cos 'Cos 'coz 'Coz 'cuz 'Cuz 'bout ma'am Ma'am o'clock O'clock lovin' Lovin' "
    "lovin Lovin havin' Havin' havin Havin doin' Doin' doin Doin goin' Goin' goin Goin Mt. Ak. "
    "Ala. Apr. Ariz. Ark. Aug. Calif. Colo. Conn. Dec. Del. Feb. Fla. Ga. Ia. Id. Ill. Ind. Jan. "
    "Jul. Jun. Kan. Kans. Ky. La. Mar. Mass. Mich. Minn. Miss. N.C. N.D. N.H. N.J. N.M. N.Y. "
    "Neb. Nebr. Nev. Nov. Oct. Okla. Ore. Pa. S.C. Sep. Sept. Tenn. Va. Wash. Wis. 'd a.m. Adm. "
    "Bros. co. Co. Corp. D.C. Dr. e.g. E.g. E.G. Gen. Gov. i.e. I.e. I.E. Inc. Jr. Ltd. Md. "
    "Messrs. Mo. Mont. Mr. Mrs. Ms. p.m. Ph.D. Prof. Rep. Rev. Sen. St. vs. v.s. "
    "nothin nothin' Nothin Nothin' nuthin nuthin' Nuthin Nuthin' ol ol' Ol Ol' somethin somethin' "
    "Somethin Somethin' em 'em ll 'll nuff 'nuff"
)
_OTHER_SPLITS = (
    "y'|all y|all how|'d|'y How|'d|'y not|'ve not|ve Not|'ve Not|ve can|not Can|not gon|na "
    "Gon|na got|ta Got|ta let|'s Let|'s c'm|on C'm|on"
)
# Stems that take the same contractions, e.g. "I" + "'ll've" -> "I", "'ll", "'ve".
_CONTRACTIONS = (
    ("i you he she it we they", "'ll ll 'll|'ve ll|ve 'd d 'd|'ve d|ve"),
    ("i you we they", "'ve ve"),
    ("you we they", "'re re"),
    ("he she it", "'s s"),
    ("i", "'m m 'm|a m|a"),
    ("who what when where why how there that this", "'s s"),
    ("who what when where why how there that this these those", "'ll ll 'll|'ve ll|ve"),
    ("who what when where why how there that this these those", "'d d 'd|'ve d|ve"),
    ("who what when where why how there these those", "'re re 've ve"),
    ("ca could do does did had may might must need ought sha should wo would", "n't nt"),
    ("ca could do does did had may might must need ought sha should wo would", "n't|'ve nt|ve"),
    ("could might must should would", "'ve ve"),
    ("ai are is was were have has dare", "n't nt"),
)
# spaCy drops these from the English exceptions: they are ordinary words.
_NOT_EXCEPTIONS = "Ill ill Its its Hell hell Shell shell Shed shed were Were Well well Whore whore"


def _exceptions() -> dict[str, tuple[str, ...]]:
    """Tokenizer exceptions (special cases): the whole string -> its tokens."""
    exc: dict[str, tuple[str, ...]] = {}
    for stems, endings in _CONTRACTIONS:
        for stem in stems.split():
            for orth in (stem, stem.title()):
                for ending in endings.split():
                    parts = (orth, *ending.split("|"))
                    exc["".join(parts)] = parts
    for hour in range(1, 13):
        for period in ("a.m.", "am", "p.m.", "pm"):
            exc[f"{hour}{period}"] = (str(hour), period)
    for split in _OTHER_SPLITS.split():
        parts = tuple(split.split("|"))
        exc["".join(parts)] = parts
    for orth in _NOT_EXCEPTIONS.split():
        exc.pop(orth, None)
    for orth in _SINGLE_TOKENS.split(" ") + [f"{c}." for c in "abcdefghijklmnopqrstuvwxyzäöü"]:
        exc[orth] = (orth,)
    for orth in _EMOTICONS.split():
        exc[orth] = (orth,)
    for unit in "cfkCFK":
        exc[f"°{unit}."] = ("°", unit, ".")
    # spaCy's update_exc adds every exception again with a typographic apostrophe.
    for orth, parts in list(exc.items()):
        if "'" in orth:
            exc[orth.replace("'", "’")] = tuple(part.replace("'", "’") for part in parts)
    return exc


_SPECIALS = _exceptions()


# --- the port of spaCy's Tokenizer._tokenize -------------------------------------------------


# Every suffix rule but the ellipsis matches at most a few characters, so the (leftmost) suffix
# is found in the tail; searching all of a long chunk of punctuation would be quadratic.
_SUFFIX_WINDOW = 16
_DIGIT = regex.compile(r"[0-9]").search
_ICON_CHAR = regex.compile(_ICON_LIST[0]).fullmatch
# The characters an infix can start with (ellipses, hyphens, "." "," ":" "<" ">" "=" "/",
# operators between digits, symbols); the symbols' long class is slow, and never needed for
# ASCII text.
_INFIX_STARTS = regex.compile(rf"[.…,\-–—~+*^:<>=/{_ICONS}]").finditer
_ASCII_INFIX_STARTS = regex.compile(r"[.,\-~+*^:<>=/]").finditer


@dataclass(frozen=True)
class _SuffixRules:
    """The suffix rules that can end with one given character."""

    literals: tuple[str, ...]  # plain strings, longest first
    search: Callable[..., Any] | None  # all of them, when some is more than a plain string
    needs_digit: bool  # every rule but the plain strings looks behind for a digit


@cache
def _suffix_rules(last: str) -> _SuffixRules:
    chosen = [
        (rule, plain)
        for rule, ends, plain in _SUFFIX_RULES
        if (last in ends if ends is not None else _ICON_CHAR(last))
    ]
    literals = sorted({rule.replace("\\", "") for rule, plain in chosen if plain}, key=len)[::-1]
    others = [rule for rule, plain in chosen if not plain]
    if not others:
        return _SuffixRules(tuple(literals), None, False)
    # Every rule is anchored at the end, so the leftmost match is the longest suffix whatever
    # the order of the rules: leaving out those that cannot end with `last` changes nothing.
    pattern = "|".join(rule + "$" for rule in [*map(regex.escape, literals), *others])
    needs_digit = all(rule.startswith("(?<=[0-9])") for rule in others)
    return _SuffixRules(tuple(literals), regex.compile(pattern).search, needs_digit)


def _suffix_length(string: str) -> int:
    if not string:
        return 0
    if string.endswith(".."):  # no rule but the ellipsis ends in two dots: the whole dot run
        return len(string) - len(string.rstrip("."))
    rules = _suffix_rules(string[-1])
    start = max(0, len(string) - _SUFFIX_WINDOW)
    if rules.search is not None and not (rules.needs_digit and not _DIGIT(string, start)):
        # Lookbehinds still see the characters before the start position.
        match = rules.search(string, start)
        return match.end() - match.start() if match else 0
    return next((len(suffix) for suffix in rules.literals if string.endswith(suffix)), 0)


def _split_affixes(
    string: str, specials: dict[str, tuple[str, ...]]
) -> tuple[list[str], str, list[str]]:
    """Strip prefixes and suffixes until none is left or an exception is reached."""
    prefixes: list[str] = []
    suffixes: list[str] = []
    last_size = 0
    while string and len(string) != last_size:
        if string in specials or string.isalpha():  # letters alone have no affix
            break
        last_size = len(string)
        match = _PREFIX_MATCH(string)
        pre_len = match.end() - match.start() if match else 0
        if pre_len:
            prefix, minus_pre = string[:pre_len], string[pre_len:]
            if minus_pre in specials:
                prefixes.append(prefix)
                string = minus_pre
                break
        suf_len = _suffix_length(string[pre_len:])
        if suf_len:
            suffix, minus_suf = string[-suf_len:], string[:-suf_len]
            if minus_suf in specials:
                suffixes.append(suffix)
                string = minus_suf
                break
        if pre_len and suf_len and pre_len + suf_len <= len(string):
            prefixes.append(prefix)
            suffixes.append(suffix)
            string = string[pre_len:-suf_len]
        elif pre_len:
            prefixes.append(prefix)
            string = minus_pre
        elif suf_len:
            suffixes.append(suffix)
            string = minus_suf
    return prefixes, string, suffixes


def _infixes(string: str) -> Iterator[Any]:
    """The infix rules' `finditer` over `string`, trying them only where an infix can start
    (each try costs every rule; most positions cannot start one)."""
    end = 0
    starts = _ASCII_INFIX_STARTS if string.isascii() else _INFIX_STARTS
    for candidate in starts(string):
        if candidate.start() >= end:
            match = _INFIX_MATCH(string, candidate.start())
            if match:
                yield match
                end = match.end()


def _split_infixes(string: str) -> list[str]:
    """spaCy's infix loop, quirk included: a match at position 0 is skipped."""
    tokens: list[str] = []
    start = 0
    for match in _infixes(string):
        infix_start, infix_end = match.span()
        if infix_start == 0:
            continue
        if infix_start != start:
            tokens.append(string[start:infix_start])
        if infix_start != infix_end:
            tokens.append(string[infix_start:infix_end])
        start = infix_end
    if string[start:]:
        tokens.append(string[start:])
    return tokens


def _tokenize_affixes(chunk: str, specials: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    special = specials.get(chunk)
    if special is not None:
        return special
    prefixes, core, suffixes = _split_affixes(chunk, specials)
    if not core:
        middle: list[str] | tuple[str, ...] = []
    elif core in specials:
        middle = specials[core]
    elif core.isalpha() or ("." in core and _URL_MATCH(core)):  # no infix in letters or a URL
        middle = [core]
    else:
        middle = _split_infixes(core)
    return (*prefixes, *middle, *reversed(suffixes))


def _has_affix(string: str) -> bool:
    return bool(
        _PREFIX_MATCH(string) or _SUFFIX_SEARCH(string) or next(_infixes(string), None)
    )


# spaCy's second pass (Tokenizer._apply_special_cases): an exception that contains affixes is
# also found as the token sequence the affix rules cut it into, e.g. ")", ":" -> "):".
_SPECIAL_PATTERNS = {
    _tokenize_affixes(orth, {}): parts for orth, parts in _SPECIALS.items() if _has_affix(orth)
}
_LONGEST_PATTERN = max(map(len, _SPECIAL_PATTERNS))
_PATTERN_STARTS = frozenset(pattern[0] for pattern in _SPECIAL_PATTERNS)


def _apply_special_patterns(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """Longest matches first, then leftmost; a match whose first or last token is taken by an
    earlier one is dropped (spaCy's _filter_special_spans)."""
    n = len(tokens)
    found = [
        (j - i, -i)
        for i in range(n)
        for j in range(i + 1, min(n, i + _LONGEST_PATTERN) + 1)
        if tokens[i:j] in _SPECIAL_PATTERNS
    ]
    taken: set[int] = set()
    kept: list[tuple[int, int]] = []
    for length, neg_start in sorted(found, reverse=True):
        start = -neg_start
        if start not in taken and start + length - 1 not in taken:
            kept.append((start, start + length))
        taken.update(range(start, start + length))
    out: list[str] = []
    done = 0
    for start, end in sorted(kept):
        out.extend(tokens[done:start])
        out.extend(_SPECIALS["".join(tokens[start:end])])
        done = end
    out.extend(tokens[done:])
    return tuple(out)


def _word_and_mark(chunk: str) -> tuple[str, ...] | None:
    """The common "word," or "word." in a few steps: what the affix loop gives when letters
    end with a one-character suffix and no prefix (None for any other chunk)."""
    word = chunk[:-1]
    if (
        not word.isalpha()
        or chunk in _SPECIALS
        or _PREFIX_MATCH(chunk)
        or _suffix_length(chunk) != 1
    ):
        return None
    return (*_SPECIALS.get(word, (word,)), chunk[-1])


def tokenize_chunk(chunk: str) -> tuple[str, ...]:
    """spaCy English tokens of one whitespace-free chunk."""
    if chunk.isalpha() or (chunk.isascii() and chunk.isdigit()):  # no rule splits these
        return _SPECIALS.get(chunk) or (chunk,)
    tokens = _word_and_mark(chunk) or _tokenize_affixes(chunk, _SPECIALS)
    if len(tokens) > 1 and not _PATTERN_STARTS.isdisjoint(tokens):
        return _apply_special_patterns(tokens)
    return tokens


class _BoundedCache(dict[str, Any]):
    """A dict that computes missing entries and empties itself when it grows too large (its
    values are pure functions of the keys, so forgetting them only costs time)."""

    def __init__(self, compute: Callable[[str], Any], max_size: int) -> None:
        super().__init__()
        self._compute = compute
        self._max_size = max_size

    def __missing__(self, key: str) -> Any:
        if len(self) >= self._max_size:
            self.clear()
        value = self[key] = self._compute(key)
        return value


# --- per-token facts -------------------------------------------------------------------------

# Bits of a token's flags; the upper 56 bits of a token's code are a stable hash of its text.
NON_SYMBOL = 1  # has a character outside datatrove's PUNCTUATION (a Gopher "word")
HAS_ALPHA = 2  # has an alphabetic character (Gopher's alpha-word rule)
SENTENCE_END = 4  # spaCy's sentencizer ends a sentence at this token (one of its punct chars)
IS_PUNCT = 8  # only Unicode punctuation (spaCy's is_punct): does not start a sentence
_FLAG_BITS = 8
FLAG_MASK = (1 << _FLAG_BITS) - 1


def _token_flags(token: str) -> int:
    if token.isalpha():  # no letter is punctuation or ends a sentence
        return NON_SYMBOL | HAS_ALPHA
    flags = 0
    if not _PUNCTUATION_SET.issuperset(token):
        flags |= NON_SYMBOL
    if any(ch.isalpha() for ch in token):
        flags |= HAS_ALPHA
    if token in _SENTENCE_END_SET:
        flags |= SENTENCE_END
    if all(unicodedata.category(ch).startswith("P") for ch in token):
        flags |= IS_PUNCT
    return flags


def _token_code(token: str) -> int:
    digest = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=7).digest()
    return int.from_bytes(digest, "little") << _FLAG_BITS | _token_flags(token)


class _Growable:
    """A numpy array that grows: appends go to a list, moved into the array when it is read."""

    def __init__(self, dtype: type) -> None:
        self._data = np.empty(1024, dtype=dtype)
        self._size = 0
        self._pending: list[int] = []
        self.append = self._pending.append

    @property
    def size(self) -> int:
        return self._size + len(self._pending)

    def extend(self, values: np.ndarray) -> None:
        self.view()
        if self._size + len(values) > len(self._data):
            bigger = np.empty(max(2 * len(self._data), self._size + len(values)), self._data.dtype)
            bigger[: self._size] = self._data[: self._size]
            self._data = bigger
        self._data[self._size : self._size + len(values)] = values
        self._size += len(values)

    def view(self) -> np.ndarray:
        if self._pending:
            pending = np.array(self._pending, dtype=self._data.dtype)
            self._pending.clear()
            self.extend(pending)
        return self._data[: self._size]


class _Numbering(dict[str, int]):
    """chunk -> its number, numbering a new chunk on its first look-up."""

    def __init__(self, add: Callable[[str], int]) -> None:
        super().__init__()
        self._add = add

    def __missing__(self, key: str) -> int:
        number = self[key] = self._add(key)
        return number


class _Vocabulary:
    """Every distinct chunk and token met so far, numbered, with per-token values in arrays.

    A document's split then costs one dict look-up per whitespace-separated chunk; its tokens,
    their codes and any other per-token value (MinHash's normalised word hashes) are numpy
    gathers. Past its size limit it starts afresh under a new `generation`, so a split made
    before can tell that its token ids are stale.
    """

    def __init__(self, max_size: int, tokenize: Callable[[str], tuple[str, ...]]) -> None:
        self.max_size = max_size
        self._tokenize = tokenize
        self._start()

    def _start(self) -> None:
        self.generation = uuid.uuid4().hex
        self.chunk_index = _Numbering(self._add_chunk)
        self.chunk_start = _Growable(np.int64)  # where each chunk's tokens start in chunk_tokens
        self.chunk_size = _Growable(np.int64)
        self.chunk_tokens = _Growable(np.int64)  # token ids of every chunk, chunk after chunk
        self._chunk_tokens_size = 0
        self.token_index: dict[str, int] = {}
        self.tokens: list[str] = []
        self.codes = _Growable(np.uint64)
        self._tables: dict[Any, _Growable] = {}

    def _add_chunk(self, chunk: str) -> int:
        tokens = self._tokenize(chunk)
        self.chunk_start.append(self._chunk_tokens_size)
        self.chunk_size.append(len(tokens))
        self._chunk_tokens_size += len(tokens)
        get = self.token_index.get
        for token in tokens:
            token_id = get(token)
            self.chunk_tokens.append(self._add_token(token) if token_id is None else token_id)
        return len(self.chunk_index)

    def _add_token(self, token: str) -> int:
        token_id = self.token_index[token] = len(self.tokens)
        self.tokens.append(token)
        self.codes.append(_token_code(token))
        return token_id

    def token_ids(self, chunks: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The token ids of `chunks`, and how many tokens each chunk has."""
        if len(self.chunk_index) > self.max_size or len(self.tokens) > self.max_size:
            self._start()
        ids = np.fromiter(map(self.chunk_index.__getitem__, chunks), np.int64, len(chunks))
        sizes = self.chunk_size.view()[ids]
        starts = self.chunk_start.view()[ids]
        if (sizes == 1).all():  # the common case: no chunk splits
            return self.chunk_tokens.view()[starts], sizes
        before = np.cumsum(sizes) - sizes  # tokens of the earlier chunks
        positions = np.arange(int(sizes.sum())) + np.repeat(starts - before, sizes)
        return self.chunk_tokens.view()[positions], sizes

    def clear_tables(self) -> None:
        self._tables.clear()

    def per_token(self, key: Any, compute: Callable[[str], int]) -> np.ndarray:
        """`compute(token)` for every token id (uint64), computed once per token."""
        table = self._tables.setdefault(key, _Growable(np.uint64))
        if table.size < len(self.tokens):
            new = self.tokens[table.size :]
            table.extend(np.fromiter(map(compute, new), np.uint64, len(new)))
        return table.view()


_VOCABULARY = _Vocabulary(1_000_000, tokenize_chunk)
# A segmented chunk is a whole phrase or paragraph (hundreds of characters of Chinese text), so
# a segmenter's table starts afresh sooner: 50,000 chunks of 500 characters are about 50 MB.
_SEGMENTED_VOCABULARY_SIZE = 50_000
_SEGMENTED_VOCABULARIES: dict[str, _Vocabulary] = {}


def _segmenting(name: str) -> Callable[[str], tuple[str, ...]]:
    applies, segment = SEGMENTERS[name].applies, load_segmenter(name)
    return lambda chunk: tuple(segment(chunk)) if applies(chunk) else tokenize_chunk(chunk)


def _vocabulary(segmenter: str | None) -> _Vocabulary:
    """The English split's vocabulary, or the one of a segmenter (`curation.segmenters`)."""
    if segmenter is None:
        return _VOCABULARY
    vocabulary = _SEGMENTED_VOCABULARIES.get(segmenter)
    if vocabulary is None:
        vocabulary = _SEGMENTED_VOCABULARIES[segmenter] = _Vocabulary(
            _SEGMENTED_VOCABULARY_SIZE, _segmenting(segmenter))
    return vocabulary


def forget_splits() -> None:
    """Forget every chunk split so far, in every vocabulary (benchmarks time splits cold)."""
    for vocabulary in (_VOCABULARY, *_SEGMENTED_VOCABULARIES.values()):
        vocabulary._start()


def clear_per_token_values() -> None:
    """Forget every `per_token` value computed so far (benchmarks time them cold)."""
    for vocabulary in (_VOCABULARY, *_SEGMENTED_VOCABULARIES.values()):
        vocabulary.clear_tables()


@dataclass(frozen=True, eq=False)
class SplitText:
    """A document split once: its spaCy-compatible words, with per-word facts, and its lines.

    `word_codes` packs, per word, a stable 56-bit hash of its text (for n-gram repetition and
    MinHash shingles) above 8 bits of flags (`NON_SYMBOL`, `HAS_ALPHA`, `SENTENCE_END`,
    `IS_PUNCT`). `chunk_sizes` is the number of words of each whitespace-separated chunk of the
    text. `token_ids` number the words in this process's vocabulary of its `segmenter`
    (`per_token` values).
    """

    text: str
    token_ids: np.ndarray = field(repr=False)
    word_codes: np.ndarray = field(repr=False)
    chunk_sizes: np.ndarray = field(repr=False)
    generation: str = field(repr=False)
    segmenter: str | None = None

    @property
    def _stale(self) -> bool:
        return self.generation != _vocabulary(self.segmenter).generation

    @cached_property
    def words(self) -> list[str]:
        if self._stale:
            return split_text(self.text, self.segmenter).words
        return list(map(_vocabulary(self.segmenter).tokens.__getitem__, self.token_ids.tolist()))

    @cached_property
    def lines(self) -> list[str]:
        """`text.splitlines()` (what Gopher's bullet and ellipsis rules and C4 use); other line
        splits are cheap derivations left to the suites that need them."""
        return self.text.splitlines()

    def per_token(self, key: Any, compute: Callable[[str], int]) -> np.ndarray:
        """`compute(word)` for every word (uint64), each distinct word computed once per
        process (`key` names the function)."""
        if self._stale:
            return split_text(self.text, self.segmenter).per_token(key, compute)
        return _vocabulary(self.segmenter).per_token(key, compute)[self.token_ids]

    @cached_property
    def word_lengths(self) -> np.ndarray:
        return np.fromiter(map(len, self.words), dtype=np.int64, count=len(self.words))

    @cached_property
    def word_flags(self) -> np.ndarray:
        return self.word_codes & np.uint64(FLAG_MASK)

    @cached_property
    def word_hashes(self) -> np.ndarray:
        """Stable 56-bit hashes of the words: equal words, equal hashes, in every process."""
        return self.word_codes >> np.uint64(_FLAG_BITS)

    @cached_property
    def line_word_starts(self) -> np.ndarray:
        """Index of each line's first word in `words`, and the word count at the end (no
        chunk spans two lines: every line break is whitespace to `str.split`)."""
        chunks_per_line = np.fromiter(map(len, map(str.split, self.lines)), np.int64)
        chunk_starts = np.concatenate(([0], np.cumsum(chunks_per_line)))
        word_starts = np.concatenate(([0], np.cumsum(self.chunk_sizes)))
        return word_starts[chunk_starts]

    @cached_property
    def sentence_codes(self) -> str:
        """One letter per word for the sentence rule: E, P or W (see `_SENTENCE_BREAK`)."""
        flags = self.word_flags
        letters = np.full(len(flags), ord("W"), dtype=np.uint8)
        letters[(flags & np.uint64(IS_PUNCT)) != 0] = ord("P")
        letters[(flags & np.uint64(SENTENCE_END)) != 0] = ord("E")
        return letters.tobytes().decode("ascii")

    def line_sentences(self, index: int) -> int:
        """Sentences of line `index` (stripped) as spaCy's sentencizer counts them."""
        line = self.lines[index].strip()
        if _ODD_SPACE.search(line):  # whitespace tokens between words: count on the line
            return count_sentences(line)
        starts = self.line_word_starts
        codes = self.sentence_codes[starts[index] : starts[index + 1]]
        return 1 + len(_SENTENCE_BREAK.findall(codes)) if codes else 0


# spaCy keeps a whitespace run as a token unless it is exactly one space; such a token is not
# punctuation, so it can start a sentence.
_PIECES = regex.compile(r"\S+|\s{2,}|[^\S ]")
_ODD_SPACE = regex.compile(r"\s{2,}|[^\S ]")
# A new sentence starts at the first non-punctuation token after a sentence-ending token
# (spaCy's Sentencizer), with one letter per token: E ends a sentence, P is other punctuation,
# W is anything else.
_SENTENCE_BREAK = regex.compile(r"E[EP]*W")


def split_words(text: str) -> list[str]:
    """spaCy blank-English tokens of `text`, whitespace tokens left out (datatrove's
    `split_into_words`)."""
    return split_text(text).words


def split_text(text: str, segmenter: str | None = None) -> SplitText:
    """The one split of `text` every rule suite (and MinHash) shares; with a `segmenter`
    (`curation.segmenters`), the chunks in its script are its words."""
    vocabulary = _vocabulary(segmenter)
    token_ids, sizes = vocabulary.token_ids(text.split())
    codes = vocabulary.codes.view()[token_ids]
    return SplitText(text, token_ids, codes, sizes, vocabulary.generation, segmenter)


# --- sentences of an arbitrary line ----------------------------------------------------------


def _sentence_codes(piece: str) -> str:
    if piece.isspace():
        return "W"
    codes = []
    for token in tokenize_chunk(piece):
        flags = _token_flags(token)
        codes.append("E" if flags & SENTENCE_END else "P" if flags & IS_PUNCT else "W")
    return "".join(codes)


_PIECE_CODES = _BoundedCache(_sentence_codes, 500_000)


def count_sentences(line: str) -> int:
    """Sentences in a stripped, non-empty line as spaCy's sentencizer splits them."""
    codes = "".join(map(_PIECE_CODES.__getitem__, _PIECES.findall(line)))
    return 1 + len(_SENTENCE_BREAK.findall(codes)) if codes else 0
