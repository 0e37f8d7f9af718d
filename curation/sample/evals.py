"""The sample's own benchmark, and pages that quote it (what decontamination must find).

Items use the lighteval-style layout `{"query": "Question: ...\\nAnswer:", "choices": [...],
"gold": i}`. Questions are long enough (13 words or more) for a 13-gram overlap test to see them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from curation.sample.compose import Block, Filler, ProseSpec, capitalise, prose
from curation.sample.content import Content, build_article, make_filler
from curation.sample.sites import Site
from curation.sample.texts_en import GENERIC, TRIVIA


@dataclass(frozen=True)
class EvalItem:
    question: str
    choices: tuple[str, ...]
    gold: int

    @property
    def query(self) -> str:
        return f"Question: {self.question}\nAnswer:"

    @property
    def answer(self) -> str:
        return self.choices[self.gold]

    def as_json(self) -> dict[str, object]:
        return {"query": self.query, "choices": list(self.choices), "gold": self.gold}


def _item(question: str, choices: str, gold: int) -> EvalItem:
    return EvalItem(question, tuple(choices.split(" | ")), gold)


ITEMS: tuple[EvalItem, ...] = (
    _item("Which gas do green plants take in from the air and use, together with water and "
          "sunlight, to make sugars during photosynthesis?",
          "Oxygen | Carbon dioxide | Nitrogen | Helium", 1),
    _item("What is the name of the long river that flows north through Egypt and empties into "
          "the Mediterranean Sea?", "The Nile | The Congo | The Niger | The Zambezi", 0),
    _item("Which planet in our solar system is famous for its broad ring system made largely of "
          "ice particles and rock?", "Mars | Saturn | Venus | Mercury", 1),
    _item("How many sides does a regular hexagon have, the shape often seen in the cells of a "
          "honeybee comb?", "Five | Six | Seven | Eight", 1),
    _item("Which scientist set out the three laws of motion and the law of universal "
          "gravitation in the seventeenth century?",
          "Galileo Galilei | Isaac Newton | Johannes Kepler | Nicolaus Copernicus", 1),
    _item("What is the chemical symbol for the element iron, which comes from its Latin name "
          "ferrum?", "Ir | In | Fe | F", 2),
    _item("At sea level and under normal atmospheric pressure, at what temperature in degrees "
          "Celsius does pure water boil?", "90 | 100 | 110 | 120", 1),
    _item("Which organ of the human body pumps blood through the arteries and veins of the "
          "circulatory system?", "The liver | The lungs | The heart | The kidneys", 2),
    _item("Which ocean is the largest and deepest on Earth, stretching from the Arctic in the "
          "north to the Southern Ocean?",
          "Atlantic Ocean | Indian Ocean | Arctic Ocean | Pacific Ocean", 3),
    _item("In which country would you find the ancient city of Machu Picchu, built by the Inca "
          "high in the Andes mountains?", "Peru | Chile | Mexico | Bolivia", 0),
    _item("What is the largest land animal alive today, known for its long trunk and its very "
          "large ears?",
          "The rhinoceros | The hippopotamus | The African elephant | The giraffe", 2),
    _item("Which keyboard instrument, with eighty-eight keys in its modern form, was originally "
          "called the pianoforte?", "Harpsichord | Piano | Organ | Accordion", 1),
    _item("Who wrote the play Romeo and Juliet, a tragedy about two young lovers from feuding "
          "families in Verona?",
          "Christopher Marlowe | William Shakespeare | Ben Jonson | John Milton", 1),
    _item("What is the freezing point of water on the Fahrenheit temperature scale under normal "
          "atmospheric pressure?", "0 degrees | 32 degrees | 100 degrees | 212 degrees", 1),
    _item("Which layer of the atmosphere contains the ozone layer that absorbs most of the "
          "ultraviolet radiation from the Sun?",
          "Troposphere | Stratosphere | Mesosphere | Thermosphere", 1),
    _item("How many bones are there in the skeleton of a typical adult human being after "
          "childhood growth has finished?", "106 | 206 | 306 | 186", 1),
    _item("Which metal is liquid at room temperature and was once widely used in thermometers "
          "and barometers?", "Lead | Mercury | Tin | Aluminium", 1),
    _item("What is the capital city of Australia, which was chosen as a compromise between "
          "Sydney and Melbourne?", "Sydney | Melbourne | Canberra | Perth", 2),
    _item("Which process describes the movement of water from the leaves of a plant into the "
          "atmosphere as vapour?", "Condensation | Transpiration | Germination | Pollination", 1),
    _item("Which continent is home to the Sahara, the largest hot desert in the world by "
          "area?", "Asia | Africa | Australia | South America", 1),
    _item("What sweet liquid do honeybees collect from flowers and turn into honey inside the "
          "hive?", "Pollen | Nectar | Sap | Resin", 1),
    _item("Which programming language, created by Guido van Rossum and first released in 1991, "
          "is named after a British comedy group?", "Ruby | Python | Perl | Java", 1),
    _item("What is the hardest naturally occurring mineral, made of carbon atoms arranged in a "
          "crystal lattice?", "Quartz | Diamond | Topaz | Corundum", 1),
    _item("In nearly all modern computer systems, how many bits make up one byte of stored "
          "data?", "Four | Eight | Sixteen | Thirty-two", 1),
    _item("Which mountain, on the border between Nepal and the Tibet region of China, has the "
          "highest elevation above sea level?", "K2 | Kangchenjunga | Mount Everest | Lhotse", 2),
    _item("Which blood cells are mainly responsible for carrying oxygen from the lungs to the "
          "rest of the body?",
          "White blood cells | Platelets | Red blood cells | Plasma cells", 2),
    _item("Which famous passenger liner struck an iceberg and sank in the North Atlantic on its "
          "maiden voyage in April 1912?", "Lusitania | Titanic | Britannic | Olympic", 1),
    _item("What is the main language spoken in Brazil, the largest country in South America by "
          "area?", "Spanish | Portuguese | French | Italian", 1),
    _item("How long does it take the Earth to complete one full orbit around the Sun, to the "
          "nearest day?", "365 days | 30 days | 24 hours | 180 days", 0),
    _item("Which Italian painter created the Mona Lisa, the portrait now displayed in the "
          "Louvre museum in Paris?", "Michelangelo | Raphael | Leonardo da Vinci | Titian", 2),
    _item("A tadpole is the young stage of which kind of animal that later lives partly on land "
          "and partly in water?", "A frog | A fish | A beetle | A snail", 0),
    _item("Which vitamin does the human skin produce when it is exposed to sunlight for a "
          "short time?", "Vitamin A | Vitamin C | Vitamin D | Vitamin K", 2),
    _item("Which gas makes up about seventy-eight percent of the Earth's atmosphere by volume "
          "near the surface?", "Oxygen | Nitrogen | Argon | Carbon dioxide", 1),
    _item("What is the name of the imaginary line that divides the Earth into the Northern and "
          "Southern Hemispheres?",
          "The Prime Meridian | The Equator | The Tropic of Cancer | The Arctic Circle", 1),
    _item("Which force keeps the planets in orbit around the Sun and makes objects fall towards "
          "the ground?", "Magnetism | Friction | Gravity | Electric charge", 2),
    _item("Which European city is famous for its canals and gondolas and is built on more than "
          "one hundred small islands?", "Amsterdam | Venice | Bruges | Stockholm", 1),
    _item("What is the largest planet in our solar system, a gas giant known for its Great Red "
          "Spot?", "Saturn | Neptune | Jupiter | Uranus", 2),
    _item("Which part of a plant cell contains chlorophyll and is the place where "
          "photosynthesis happens?",
          "The nucleus | The chloroplast | The cell wall | The vacuole", 1),
    _item("How many players from one team are on the field at the same time in a standard game "
          "of association football?", "Nine | Ten | Eleven | Twelve", 2),
    _item("Which element has the atomic number one and is the lightest and most abundant "
          "element in the universe?", "Helium | Hydrogen | Lithium | Oxygen", 1),
)

# How a page quotes an item: the benchmark layout itself, or woven into prose.
_QUOTE_STYLES = (
    lambda item: [Block("p", f"Question: {item.question}"), Block("p", f"Answer: {item.answer}")],
    lambda item: [Block("p", f"{item.question} The answer was {item.answer}.")],
    lambda item: [Block("p", item.question), Block("p", f"Answer: {item.answer}.")],
)


def choose_quoted(rng: random.Random, count: int) -> list[int]:
    """Which items the web pages leak (indices into ITEMS), sorted."""
    return sorted(rng.sample(range(len(ITEMS)), count))


def build_eval_page(rng: random.Random, quoted: list[int], site: Site) -> Content:
    """A quiz-night write-up, or a forum thread, that quotes `quoted` items verbatim."""
    if site.genre == "forum":
        content = build_article(rng, site, rng.randint(150, 300))
        quotes = [block for index in quoted for block in rng.choice(_QUOTE_STYLES)(ITEMS[index])]
        text = " ".join(block.text for block in quotes)
        post = Block("post", f"Can anyone settle an argument from last night's quiz? {text}",
                     meta=f"quiz_fan|2023-11-{rng.randint(1, 28):02d}")
        content.blocks.insert(1, post)
        return content
    filler: Filler = make_filler(rng, TRIVIA)
    spec = ProseSpec(TRIVIA.get("sentences"), rng.randint(120, 260),
                     intros=(), closings=GENERIC.get("closings"))
    intro = prose(rng, filler, spec)
    quotes = []
    for number, index in enumerate(quoted, start=1):
        quotes.append(Block("h2", f"Question {number}"))
        quotes += rng.choice(_QUOTE_STYLES)(ITEMS[index])
    title = capitalise(filler.fill(rng.choice(TRIVIA.get("titles"))))
    blocks = intro[:-1] + quotes + intro[-1:] + [Block("p", line) for line in site.boilerplate]
    return Content(title, blocks, filler.bound["item"])
