"""Pages carrying personal data: contact details, phone numbers, IP addresses and card numbers,
next to look-alikes (versions, dates, prices, ISBNs, order numbers, private IPs) that a scrubber
must leave alone. Every value written is recorded in the page's truth."""

from __future__ import annotations

import random

from curation.sample.bank import Bank
from curation.sample.compose import Block, Filler
from curation.sample.content import Content, build_article
from curation.sample.sites import Site

TEMPLATES = Bank.parse("pii", "multi", """
[contact]
- Questions about this article? Email {first} at {email} or call {phone_us} on weekday
  mornings.
- If you would like a place on the spring workshop, write to {email} or ring {phone_us_intl};
  places are limited to twelve.
- You can reach the editor directly at {email}, and we try to reply within two working days.
- Readers in the area can call our office on {phone_us} between {time} and five, or drop a note
  to {email}.
[contact_uk]
- For press enquiries please contact our office on {phone_uk} or send an email to {email}.
- Call us on {phone_uk} between 9am and 5pm, Monday to Friday, or write to {email}.
[forum_contact]
- Happy to send you some spare seeds, just drop me a line at {email} and include your postal
  town.
- My number is {phone_us}, so text me before {time} if you want to pick up the cuttings this
  weekend.
- I am selling my old one for {price}; call or text {phone_us_intl} if you are interested.
- Feel free to email me at {email} and I will send you the spreadsheet I use.
[server_ips]
- The server at {ipv4} stopped answering after I upgraded to version {version}, but the router
  at {private_ip} still responds to ping.
- Here is the relevant log line, copied as it is: connection from {ipv4} refused at {time} on
  {date}.
- My AAAA record points to {ipv6}, and curl over IPv6 works from the machine itself but not
  from outside.
- Fail2ban banned {ipv4} overnight after hundreds of failed logins on the SSH port.
- The container gets {private_ip} internally and the host forwards ports 80 and 443 from {ipv4}.
- I am running version {version} on a VPS at {ipv4} with IPv6 address {ipv6}.
[classified]
- For sale: a child's bicycle in good condition, {price}. Call {phone_us} after {time}.
- Garage sale on {date} from {time} at the corner of Elm Street; enquiries to {email}.
- Lost cat near the park, grey with a white chest, answers to Pepper. Please call
  {phone_us_intl} with any news.
- Piano lessons for beginners of all ages, {price} per half hour. Ring {phone_us} or email
  {email}.
[card_leak]
- One reader forwarded us a message in which the fraudster had typed out a full card number,
  {card}, to make it look official.
- We found lines containing card {card} in the old access logs, so the file has been deleted
  and the payment provider informed.
- Order {order} was charged twice to card {card} on {date}, and the refund took three weeks.
- The reference on the letter was {non_luhn}, which is a tracking number and not a card, so do
  not panic if you see one like it.
[de]
- Bei Fragen zur Tour erreichen Sie mich unter {email} oder telefonisch unter {phone_de}.
- Die Hütte ist unter {phone_de} erreichbar, Reservierungen bitte per E-Mail an {email}.
- Unser Kundendienst ist werktags ab {time} unter {phone_de} zu erreichen.
[fr]
- Pour toute question, écrivez-moi à {email} ou appelez le {phone_fr}.
- Réservations au {phone_fr}, du mardi au samedi à partir de {time}.
[es]
- Si tienes dudas, escríbeme a {email} o llama al {phone_es}.
- Para pedidos, llama al {phone_es} de lunes a viernes a partir de las {time}.
[slot:first]
- Anna
- Ben
- Carla
- David
- Grace
- Hugo
""")

# Subkind -> (template section, sites it appears on, paragraphs of personal data).
SUBKINDS: dict[str, tuple[str, tuple[str, ...], int]] = {
    "contact": ("contact", ("greenthumb-journal.net", "plainmoney-guide.com",
                            "pawsandwhiskers-blog.com", "wanderlight-travel.com"), 1),
    "contact_uk": ("contact_uk", ("fixit-at-home.co.uk",), 1),
    "forum_contact": ("forum_contact", ("veggie-patch-forum.org",), 2),
    "server_ips": ("server_ips", ("selfhosters-forum.net", "devnotes-daily.io"), 3),
    "classified": ("classified", ("riverton-gazette.com",), 3),
    "card_leak": ("card_leak", ("plainmoney-guide.com", "selfhosters-forum.net"), 2),
    "contact_de": ("de", ("bergwandern-blog.de", "technik-ratgeber.de"), 1),
    "contact_fr": ("fr", ("cuisine-facile.fr", "escapades-en-france.fr"), 1),
    "contact_es": ("es", ("recetas-del-sol.es", "huerto-urbano.es"), 1),
}

# How many pages of each subkind the sample holds (about 10% of all pages).
COUNTS: dict[str, int] = {
    "contact": 10, "contact_uk": 4, "forum_contact": 7, "server_ips": 9, "classified": 6,
    "card_leak": 4, "contact_de": 5, "contact_fr": 3, "contact_es": 2,
}


def build_pii_page(rng: random.Random, site: Site, subkind: str, target: int) -> Content:
    """An ordinary page of `site` with paragraphs of personal data placed among its content."""
    content = build_article(rng, site, target)
    section, _, paragraphs = SUBKINDS[subkind]
    filler = Filler(rng, site.lang, TEMPLATES.slots)
    templates = list(TEMPLATES.get(section))
    rng.shuffle(templates)
    blocks = [_block(rng, site, filler.fill(template)) for template in templates[:paragraphs]]
    end = len(content.blocks) - len(site.boilerplate)
    if section == "classified":
        # Small ads come as their own section at the foot of the news item.
        content.blocks[end:end] = [Block("h2", "Classified ads"), *blocks]
    else:
        # Personal data sits among the content, not only at the end, as on real pages.
        for block in blocks:
            content.blocks.insert(rng.randint(1, max(1, end)), block)
    content.pii += filler.pii
    content.lookalikes += filler.lookalikes
    return content


def _block(rng: random.Random, site: Site, text: str) -> Block:
    if site.genre != "forum":
        return Block("p", text)
    return Block("post", text, meta=f"{rng.choice(site.authors)}|2023-12-{rng.randint(1, 28):02d}")
