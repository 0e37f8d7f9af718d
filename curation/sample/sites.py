"""The fictional web sites of the sample, and the page chrome each language uses.

Each site has its own template, navigation, footer and a few in-article lines (newsletter pleas,
affiliate notices) that recur on every page of the site: that is what boilerplate-line removal
and main-text extraction are there to strip.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Site:
    domain: str
    name: str
    lang: str
    topic: str | None
    genre: str  # blog, article, recipe, howto, review, news, forum, spam, aggregator
    template: str  # magazine, blog, forum, review, news, spam, parked
    url_style: str  # dated, section, news, forum, html, id
    tagline: str = ""
    nav: tuple[str, ...] = ()
    boilerplate: tuple[str, ...] = ()
    authors: tuple[str, ...] = ()
    www: bool = True
    server: str = "nginx"

    @property
    def host(self) -> str:
        return f"www.{self.domain}" if self.www else self.domain


CHROME: dict[str, dict[str, str]] = {
    "en": {
        "cookie": "We use cookies to improve your experience on our site. By continuing to "
        "browse, you agree to our use of cookies.",
        "accept": "Accept all", "settings": "Manage preferences", "home": "Home",
        "related": "Related articles", "popular": "Most read", "recent": "Recent posts",
        "newsletter": "Subscribe to our newsletter",
        "newsletter_text": "Get the best new posts in your inbox every Friday. No spam, ever.",
        "subscribe": "Subscribe", "share": "Share this article", "comments": "Comments",
        "leave_comment": "Leave a comment", "rights": "All rights reserved.",
        "privacy": "Privacy policy", "terms": "Terms of use", "contact": "Contact",
        "about": "About us", "by": "By", "read": "min read", "search": "Search",
        "ingredients": "Ingredients", "method": "Method", "need": "What you need",
        "steps": "Step by step", "pros": "Pros", "cons": "Cons", "verdict": "Verdict",
        "score": "Our score", "reply": "Reply", "joined": "Joined", "posts": "Posts",
        "archives": "Archives", "categories": "Categories", "tags": "Tags",
        "prev": "Previous post", "next": "Next post",
    },
    "de": {
        "cookie": "Wir verwenden Cookies, um Ihnen das beste Nutzererlebnis zu bieten. Wenn Sie "
        "die Seite weiter nutzen, stimmen Sie der Verwendung von Cookies zu.",
        "accept": "Alle akzeptieren", "settings": "Einstellungen", "home": "Startseite",
        "related": "Ähnliche Artikel", "popular": "Meistgelesen", "recent": "Neueste Beiträge",
        "newsletter": "Newsletter abonnieren",
        "newsletter_text": "Einmal im Monat die besten Beiträge direkt in Ihr Postfach.",
        "subscribe": "Abonnieren", "share": "Artikel teilen", "comments": "Kommentare",
        "leave_comment": "Kommentar schreiben", "rights": "Alle Rechte vorbehalten.",
        "privacy": "Datenschutz", "terms": "Impressum", "contact": "Kontakt",
        "about": "Über uns", "by": "Von", "read": "Min. Lesezeit", "search": "Suche",
        "ingredients": "Zutaten", "method": "Zubereitung", "need": "Das brauchen Sie",
        "steps": "Schritt für Schritt", "pros": "Vorteile", "cons": "Nachteile",
        "verdict": "Fazit", "score": "Bewertung", "reply": "Antworten",
        "joined": "Dabei seit", "posts": "Beiträge", "archives": "Archiv",
        "categories": "Kategorien", "tags": "Schlagwörter",
        "prev": "Vorheriger Beitrag", "next": "Nächster Beitrag",
    },
    "fr": {
        "cookie": "Nous utilisons des cookies pour améliorer votre expérience. En poursuivant "
        "votre navigation, vous acceptez leur utilisation.",
        "accept": "Tout accepter", "settings": "Paramètres", "home": "Accueil",
        "related": "Articles similaires", "popular": "Les plus lus", "recent": "Articles récents",
        "newsletter": "Abonnez-vous à la newsletter",
        "newsletter_text": "Nos meilleures recettes et idées, une fois par semaine.",
        "subscribe": "S'abonner", "share": "Partager cet article", "comments": "Commentaires",
        "leave_comment": "Laisser un commentaire", "rights": "Tous droits réservés.",
        "privacy": "Confidentialité", "terms": "Mentions légales", "contact": "Contact",
        "about": "À propos", "by": "Par", "read": "min de lecture", "search": "Rechercher",
        "ingredients": "Ingrédients", "method": "Préparation", "need": "Matériel",
        "steps": "Étape par étape", "pros": "Points forts", "cons": "Points faibles",
        "verdict": "Notre avis", "score": "Note", "reply": "Répondre",
        "joined": "Inscrit depuis", "posts": "Messages", "archives": "Archives",
        "categories": "Catégories", "tags": "Mots-clés",
        "prev": "Article précédent", "next": "Article suivant",
    },
    "es": {
        "cookie": "Utilizamos cookies para mejorar tu experiencia. Si continúas navegando, "
        "aceptas su uso.",
        "accept": "Aceptar todas", "settings": "Configurar", "home": "Inicio",
        "related": "Artículos relacionados", "popular": "Lo más leído",
        "recent": "Entradas recientes", "newsletter": "Suscríbete a nuestro boletín",
        "newsletter_text": "Recibe nuestras mejores recetas cada semana en tu correo.",
        "subscribe": "Suscribirse", "share": "Compartir", "comments": "Comentarios",
        "leave_comment": "Deja un comentario", "rights": "Todos los derechos reservados.",
        "privacy": "Política de privacidad", "terms": "Aviso legal", "contact": "Contacto",
        "about": "Quiénes somos", "by": "Por", "read": "min de lectura", "search": "Buscar",
        "ingredients": "Ingredientes", "method": "Preparación", "need": "Necesitarás",
        "steps": "Paso a paso", "pros": "A favor", "cons": "En contra",
        "verdict": "Veredicto", "score": "Puntuación", "reply": "Responder",
        "joined": "Miembro desde", "posts": "Mensajes", "archives": "Archivo",
        "categories": "Categorías", "tags": "Etiquetas",
        "prev": "Entrada anterior", "next": "Entrada siguiente",
    },
    "ja": {
        # No characters outside Shift_JIS here (no copyright sign): one ja page is served in it.
        "cookie": "当サイトでは、より良いサービスを提供するためにクッキーを使用しています。",
        "accept": "同意する", "settings": "設定", "home": "ホーム",
        "related": "関連記事", "popular": "人気の記事", "recent": "最新の記事",
        "newsletter": "メールマガジン登録", "newsletter_text": "新しいレシピを毎週お届けします。",
        "subscribe": "登録する", "share": "この記事をシェアする", "comments": "コメント",
        "leave_comment": "コメントを書く", "rights": "All rights reserved.",
        "privacy": "プライバシーポリシー", "terms": "利用規約", "contact": "お問い合わせ",
        "about": "このブログについて", "by": "投稿者", "read": "分で読めます",
        "search": "検索", "ingredients": "材料", "method": "作り方", "need": "用意するもの",
        "steps": "手順", "pros": "良い点", "cons": "気になる点", "verdict": "まとめ",
        "score": "評価", "reply": "返信", "joined": "登録日", "posts": "投稿数",
        "archives": "アーカイブ", "categories": "カテゴリー", "tags": "タグ",
        "prev": "前の記事", "next": "次の記事",
    },
    "ru": {
        "cookie": "Мы используем файлы cookie, чтобы сайт работал лучше. Продолжая просмотр, "
        "вы соглашаетесь с их использованием.",
        "accept": "Принять все", "settings": "Настройки", "home": "Главная",
        "related": "Похожие статьи", "popular": "Популярное", "recent": "Новые записи",
        "newsletter": "Подпишитесь на рассылку",
        "newsletter_text": "Лучшие маршруты и советы раз в месяц на вашу почту.",
        "subscribe": "Подписаться", "share": "Поделиться", "comments": "Комментарии",
        "leave_comment": "Оставить комментарий", "rights": "Все права защищены.",
        "privacy": "Политика конфиденциальности", "terms": "Пользовательское соглашение",
        "contact": "Контакты", "about": "О нас", "by": "Автор", "read": "мин чтения",
        "search": "Поиск", "ingredients": "Ингредиенты", "method": "Приготовление",
        "need": "Что понадобится", "steps": "Пошагово", "pros": "Плюсы", "cons": "Минусы",
        "verdict": "Итог", "score": "Оценка", "reply": "Ответить",
        "joined": "На сайте с", "posts": "Сообщений", "archives": "Архив",
        "categories": "Рубрики", "tags": "Метки", "prev": "Предыдущая запись",
        "next": "Следующая запись",
    },
}
# Lorem-ipsum placeholder pages use English chrome.
CHROME["la"] = CHROME["en"]

SITES: tuple[Site, ...] = (
    Site("greenthumb-journal.net", "Greenthumb Journal", "en", "gardening", "blog", "blog",
         "dated", "Notes from a small kitchen garden",
         ("Home", "Vegetables", "Fruit", "Flowers", "Seasonal jobs", "About"),
         ("Subscribe to the Greenthumb Journal newsletter for seasonal jobs delivered every "
          "month.", "Some links on this page are affiliate links, which help keep the journal "
          "running at no extra cost to you."),
         ("Ruth Ellery", "Sam Okafor")),
    Site("veggie-patch-forum.org", "The Veggie Patch Forum", "en", "gardening", "forum", "forum",
         "forum", "Friendly advice for allotment and garden growers",
         ("Forums", "New posts", "Members", "Rules", "Log in"),
         ("Please read the forum rules before posting in this section.",),
         ("plotholder_mike", "greenfingers22", "allotment_annie", "compost_king", "rhubarb_ruth"),
         www=False, server="Apache"),
    Site("trailnotes-outdoors.com", "Trailnotes", "en", "hiking", "blog", "blog", "dated",
         "Walking routes, kit and honest trip reports",
         ("Home", "Routes", "Kit", "Skills", "About"),
         ("Always check local conditions and carry a map before heading into the hills.",),
         ("Alex Brennan", "Jo Whitfield")),
    Site("weeknight-kitchen.com", "Weeknight Kitchen", "en", "cooking", "recipe", "magazine",
         "section", "Simple food for busy evenings",
         ("Recipes", "Quick dinners", "Baking", "Meal plans", "About"),
         ("Did you make this recipe? Tag us and let us know how it went.",
          "Nutrition information is an estimate and will vary with the ingredients you use."),
         ("Priya Sharma", "Tom Keller")),
    Site("fixit-at-home.co.uk", "Fix It At Home", "en", "diy", "howto", "magazine", "section",
         "Practical DIY for real houses", ("Home", "Plumbing", "Decorating", "Repairs", "Tools"),
         ("This guide is for information only; if in doubt, consult a qualified tradesperson.",),
         ("Gareth Hughes", "Nina Patel"), server="Apache"),
    Site("plainmoney-guide.com", "Plain Money Guide", "en", "finance", "article", "magazine",
         "section", "Money advice without the jargon",
         ("Budgeting", "Saving", "Debt", "Investing", "About"),
         ("This article is general information, not personal financial advice.",),
         ("Helen Marsh", "David Osei")),
    Site("devnotes-daily.io", "Devnotes Daily", "en", "tech", "howto", "blog", "dated",
         "Short, practical notes for people who run their own servers",
         ("Home", "Linux", "Networking", "Backups", "Archive"),
         ("Found a mistake? Open an issue on our public tracker and we will fix it.",),
         ("Lena Fischer", "Marco Rossi"), www=False),
    Site("selfhosters-forum.net", "Selfhosters Forum", "en", "tech", "forum", "forum", "forum",
         "Run it yourself", ("Forums", "Guides", "New posts", "Members", "Log in"),
         ("Reminder: never post passwords or private keys in a public thread.",),
         ("tinkerer42", "root_and_branch", "nas_guy", "packetpusher", "uptime_ursula"),
         server="Apache"),
    Site("gearcheck-reviews.com", "GearCheck", "en", "gadgets", "review", "review", "html",
         "Independent reviews of everyday tech",
         ("Reviews", "Best picks", "Deals", "How we test", "About"),
         ("We may earn a commission when you buy through links on our site.",),
         ("Chris Lindqvist", "Maya Duarte")),
    Site("shelfwise-reviews.com", "Shelfwise", "en", "books", "review", "review", "html",
         "Book reviews for curious readers",
         ("Reviews", "Fiction", "Non-fiction", "Reading groups", "About"),
         ("Shelfwise is reader-supported; buying through our links helps local bookshops.",),
         ("Imogen Walsh", "Felix Brandt")),
    Site("riverton-gazette.com", "The Riverton Gazette", "en", "news", "news", "news", "news",
         "News for Riverton and the Wend valley",
         ("News", "Sport", "Business", "What's on", "Classifieds", "Contact"),
         ("Do you have a story for us? Get in touch with the newsdesk.",),
         ("Staff reporter", "Karen Doyle", "Michael Burns")),
    Site("curious-cosmos.org", "Curious Cosmos", "en", "science", "article", "magazine",
         "section", "Science explained for everyone",
         ("Space", "Earth", "Life", "Explainers", "About"),
         ("Curious Cosmos is a non-profit; donations keep our explainers free for everyone.",),
         ("Dr. Ana Lopes", "Ben Carter")),
    Site("pawsandwhiskers-blog.com", "Paws and Whiskers", "en", "pets", "blog", "blog", "dated",
         "Life with our rescue animals", ("Home", "Dogs", "Cats", "Small pets", "About"),
         ("Always ask your vet before changing your pet's diet or medication.",),
         ("Claire Dunn",)),
    Site("wanderlight-travel.com", "Wanderlight", "en", "travel", "blog", "blog", "dated",
         "Slow travel, mostly by train", ("Home", "Destinations", "Itineraries", "Tips", "About"),
         ("Some of the links in this post are affiliate links.",), ("Nora Lind", "Ravi Mehta")),
    Site("pubquiz-corner.com", "Pub Quiz Corner", "en", "trivia", "blog", "blog", "dated",
         "Questions, answers and the odd argument", ("Home", "Quiz nights", "Questions", "About"),
         ("New questions every Wednesday; suggestions are always welcome.",),
         ("Quizmaster Dave",)),
    Site("dailyfeed-aggregator.com", "DailyFeed", "en", None, "aggregator", "news", "id",
         "The best of the web, every day", ("Top stories", "Lifestyle", "Tech", "Food"), (),
         ("DailyFeed staff",), server="cloudflare"),
    Site("bergwandern-blog.de", "Bergwandern-Blog", "de", "de_hiking", "blog", "blog", "dated",
         "Touren, Tipps und Hüttengeschichten",
         ("Startseite", "Touren", "Ausrüstung", "Hütten", "Über uns"),
         ("Alle Angaben ohne Gewähr, bitte informiert euch vor der Tour über die aktuellen "
          "Bedingungen.",), ("Stefan Huber", "Katrin Maier")),
    Site("technik-ratgeber.de", "Technik-Ratgeber", "de", "de_tech", "howto", "magazine",
         "section", "Technik verständlich erklärt",
         ("Startseite", "Netzwerk", "Sicherheit", "Smart Home", "Kontakt"),
         ("Dieser Artikel enthält Affiliate-Links, für die wir eine kleine Provision erhalten.",),
         ("Jana Becker", "Thomas Wolf")),
    Site("cuisine-facile.fr", "Cuisine Facile", "fr", "fr_cooking", "recipe", "magazine",
         "section", "Des recettes simples pour tous les jours",
         ("Accueil", "Recettes", "Desserts", "Menus", "Contact"),
         ("Retrouvez toutes nos recettes dans la newsletter du vendredi.",),
         ("Claire Dubois", "Julien Martin")),
    Site("escapades-en-france.fr", "Escapades en France", "fr", "fr_travel", "blog", "blog",
         "dated", "Week-ends et balades en France",
         ("Accueil", "Destinations", "Week-ends", "Conseils", "À propos"),
         ("Cet article contient des liens affiliés.",), ("Léa Moreau",), www=False),
    Site("recetas-del-sol.es", "Recetas del Sol", "es", "es_cooking", "recipe", "magazine",
         "section", "Cocina casera de todos los días",
         ("Inicio", "Recetas", "Postres", "Menús", "Contacto"),
         ("Si te ha gustado esta receta, compártela con tus amigos.",),
         ("Lucía Fernández", "Javier Ruiz")),
    Site("huerto-urbano.es", "Huerto Urbano", "es", "es_gardening", "blog", "blog", "dated",
         "Cultivar en la ciudad", ("Inicio", "Huerto", "Macetas", "Calendario", "Contacto"),
         ("Apúntate a nuestro boletín para recibir el calendario de siembra.",),
         ("Marta Gil",)),
    Site("hibi-no-gohan.jp", "日々のごはん", "ja", "ja_cooking", "recipe", "blog", "id",
         "毎日のおうちごはん記録", ("ホーム", "レシピ", "お弁当", "プロフィール"),
         ("この記事が役に立ったら、ぜひシェアしてください。",), ("ゆき",)),
    Site("pohody-i-gory.ru", "Походы и горы", "ru", "ru_hiking", "blog", "blog", "id",
         "Маршруты выходного дня", ("Главная", "Маршруты", "Снаряжение", "О нас"),
         ("Перед походом обязательно проверьте прогноз погоды.",), ("Андрей Соколов",)),
    # Spam and parked domains: their own bare templates.
    Site("mega-casino-bonus.biz", "Mega Casino Bonus", "en", None, "spam", "spam", "html"),
    Site("cheap-pharma-deals.info", "Cheap Pharma Deals", "en", None, "spam", "spam", "html"),
    Site("fast-loans-today.xyz", "Fast Loans Today", "en", None, "spam", "spam", "html"),
    Site("replica-watch-outlet.top", "Replica Watch Outlet", "en", None, "spam", "spam", "html"),
    Site("best-links-directory.xyz", "Best Links Directory", "en", None, "spam", "spam", "html"),
    Site("top10-deals-online.com", "Top 10 Deals Online", "en", None, "spam", "spam", "html"),
    Site("parked-domains-4sale.com", "Domain for sale", "en", None, "spam", "parked", "html",
         www=False),
)

SITES_BY_DOMAIN: dict[str, Site] = {site.domain: site for site in SITES}

# Domains the blocklist names; the link farm is crawled on its www. host, so a blocklist
# entry must match subdomains too.
BLOCKED_DOMAINS = (
    "mega-casino-bonus.biz",
    "cheap-pharma-deals.info",
    "replica-watch-outlet.top",
    "best-links-directory.xyz",
)
# Listed too, but never crawled: a blocklist normally names far more than one crawl meets.
BLOCKED_ELSEWHERE = ("free-movie-streams.xyz", "crypto-doubler-now.biz")


def is_blocked(domain: str) -> bool:
    return any(domain == d or domain.endswith("." + d) for d in BLOCKED_DOMAINS)
