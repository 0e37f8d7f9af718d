"""The curated `reference` source: short encyclopedia-style articles (quality-classifier positives).

Ten families of six subjects. Each article opens with a definition, gives the subject's own
facts, then general expository sentences of its family, so articles read as clean, neutral
prose and do not repeat whole paragraphs across the source.
"""

from __future__ import annotations

import random

from curation.sample.bank import Bank
from curation.sample.compose import capitalise

FAMILIES = Bank.parse("reference", "en", """
[general:element]
- Like every element, {name} is defined by the number of protons in the nucleus of its atoms.
- The chemical behaviour of {name} follows from the arrangement of its electrons, which
  determines how it bonds with other atoms.
- Isotopes of {name} differ in the number of neutrons they contain, although they behave almost
  identically in chemical reactions.
- Chemists place {name} in the periodic table according to its atomic number and the structure
  of its outer electron shell.
- Its position in the periodic table helps to explain why {name} reacts readily with some
  elements and hardly at all with others.
- The study of {name} and its compounds has contributed to advances in medicine, industry and
  materials science.
- Measurements of {name} in rocks, water and living tissue are routine in environmental
  monitoring.
- Historical accounts of {name} show how chemistry developed from practical craft knowledge into
  a quantitative science.
[e:Hydrogen]
- name=hydrogen
- def=a chemical element with the symbol H and atomic number 1
- It is the lightest element and the most abundant in the universe, making up most of the
  ordinary matter in stars.
- At standard temperature and pressure it is a colourless, odourless gas made of diatomic
  molecules.
- Hydrogen combines with oxygen to form water, and it is present in nearly all organic compounds.
- Henry Cavendish identified it as a distinct substance in 1766, and Antoine Lavoisier later gave
  it its name, which means water-former.
- Today it is used in the production of ammonia, in oil refining and, increasingly, as a fuel.
[e:Carbon]
- name=carbon
- def=a chemical element with the symbol C and atomic number 6
- It forms a vast number of compounds and is the chemical basis of all known life.
- Pure carbon occurs in several forms, including graphite, diamond and the fullerenes.
- Diamond is the hardest natural material, while graphite is soft enough to be used in pencils.
- Carbon dioxide in the atmosphere is taken up by plants during photosynthesis and released again
  by respiration and combustion.
- The radioactive isotope carbon-14 is used to date organic remains up to about fifty thousand
  years old.
[e:Nitrogen]
- name=nitrogen
- def=a chemical element with the symbol N and atomic number 7
- It makes up about seventy-eight percent of the Earth's atmosphere by volume.
- Nitrogen gas is colourless and largely unreactive because of the strong triple bond between its
  two atoms.
- It is an essential part of amino acids, proteins and nucleic acids.
- The Scottish physician Daniel Rutherford is usually credited with its discovery in 1772.
- Industrial fixation of nitrogen into ammonia made modern synthetic fertilisers possible.
[e:Oxygen]
- name=oxygen
- def=a chemical element with the symbol O and atomic number 8
- It is the third most abundant element in the universe and the most abundant element by mass in
  the Earth's crust.
- Most of the oxygen in the atmosphere has been produced by photosynthesis over billions of
  years.
- Animals use oxygen in respiration to release energy from food.
- It was isolated independently by Carl Wilhelm Scheele and Joseph Priestley in the 1770s.
- Ozone, a form of oxygen with three atoms per molecule, absorbs ultraviolet radiation in the
  stratosphere.
[e:Iron]
- name=iron
- def=a chemical element with the symbol Fe and atomic number 26
- By mass it is the most common element on Earth, forming much of the planet's outer and inner
  core.
- Iron has been smelted from ore for more than three thousand years, giving its name to the Iron
  Age.
- Alloyed with small amounts of carbon it forms steel, the most widely used metal in construction
  and engineering.
- In the human body, iron is a key component of haemoglobin, which carries oxygen in the blood.
- Exposed to air and moisture, iron slowly oxidises to form rust.
[e:Copper]
- name=copper
- def=a chemical element with the symbol Cu and atomic number 29
- It is a soft, ductile metal with very high thermal and electrical conductivity.
- Copper was one of the first metals worked by humans, and alloyed with tin it forms bronze.
- Its main modern use is in electrical wiring, motors and electronics.
- Over time, exposed copper develops a green patina, as seen on many old roofs and statues.
- Copper is also an essential trace element in the diet of plants and animals.

[general:planet]
- Like the other planets, {name} formed from the disc of gas and dust that surrounded the young
  Sun about four and a half billion years ago.
- Astronomers study {name} with ground-based telescopes, space telescopes and robotic probes.
- The orbit of {name} is an ellipse, so its distance from the Sun varies over the course of its
  year.
- Observations of {name} have helped scientists test models of how planetary atmospheres and
  interiors work.
- The planet is named after a figure from Roman mythology, following a tradition that goes back
  to antiquity.
- Data returned by spacecraft have revealed details of {name} that were invisible from Earth.
- Comparisons between {name} and the Earth help to explain why the planets of the Solar System
  are so different from one another.
- Gravity from {name} and the other planets subtly shapes the orbits of asteroids and comets.
[e:Mercury (planet)]
- name=Mercury
- def=the first planet from the Sun in the Solar System
- It is the smallest planet, and it completes an orbit in about eighty-eight days.
- Mercury has almost no atmosphere, so temperatures swing from extreme heat by day to intense
  cold at night.
- Its heavily cratered surface resembles that of the Moon.
- Mercury has no natural satellites.
- Two spacecraft, Mariner 10 and MESSENGER, have studied the planet closely.
[e:Venus]
- name=Venus
- def=the second planet from the Sun in the Solar System
- It is similar in size to the Earth but has a dense atmosphere composed mostly of carbon
  dioxide.
- A runaway greenhouse effect makes Venus the hottest planet, with surface temperatures above
  four hundred and fifty degrees Celsius.
- Thick clouds of sulphuric acid hide its surface from view in visible light.
- Venus rotates very slowly and in the opposite direction to most other planets.
- After the Moon, it is the brightest natural object in the night sky.
[e:Mars]
- name=Mars
- def=the fourth planet from the Sun in the Solar System
- It is often called the Red Planet because iron oxide on its surface gives it a reddish
  appearance.
- Mars has a thin atmosphere of carbon dioxide and two small moons, Phobos and Deimos.
- Olympus Mons, on Mars, is one of the largest volcanoes known in the Solar System.
- Evidence from orbiters and rovers shows that liquid water once flowed across its surface.
- Mars has been explored by more robotic missions than any other planet apart from the Earth.
[e:Jupiter]
- name=Jupiter
- def=the fifth planet from the Sun in the Solar System
- It is the largest planet, with a mass more than twice that of all the other planets combined.
- Jupiter is a gas giant composed mainly of hydrogen and helium.
- Its Great Red Spot is a giant storm that has been observed for centuries.
- The four largest of its many moons were discovered by Galileo Galilei in 1610.
- Jupiter's strong magnetic field traps charged particles in intense radiation belts.
[e:Saturn]
- name=Saturn
- def=the sixth planet from the Sun in the Solar System
- It is the second largest planet and is best known for its prominent ring system.
- The rings consist mostly of ice particles with smaller amounts of rock and dust.
- Saturn is a gas giant with an average density lower than that of water.
- Its largest moon, Titan, has a thick atmosphere and lakes of liquid methane and ethane.
- The Cassini spacecraft orbited Saturn for thirteen years before ending its mission in 2017.
[e:Neptune]
- name=Neptune
- def=the eighth and most distant known planet from the Sun in the Solar System
- It is the fourth largest planet by diameter.
- Neptune was the first planet located through mathematical prediction rather than direct
  observation, in 1846.
- Methane in its atmosphere absorbs red light, giving the planet a deep blue colour.
- Neptune has the strongest winds measured on any planet in the Solar System.
- Its largest moon, Triton, orbits in the opposite direction to the planet's rotation.

[general:river]
- Like most large rivers, {name} shapes the land around it through erosion and the deposition of
  sediment.
- Seasonal changes in rainfall and snowmelt cause the level of {name} to rise and fall during the
  year.
- Settlements have grown up along {name} for thousands of years, drawn by water, fertile land and
  transport.
- Bridges, ports and flood defences along {name} reflect the importance of the river to the
  economy of the region.
- The wetlands associated with the river provide habitats for birds, fish and many other animals.
- Pollution from farms, industry and towns has affected water quality in parts of the river, and
  restoration projects aim to reduce it.
- Hydrologists measure the flow of {name} at gauging stations to forecast floods and manage water
  supplies.
- Agreements between the authorities along its course govern navigation and the use of its
  water.
[e:Danube]
- name=the Danube
- def=a major river of Central and Eastern Europe
- It is the second longest river in Europe, flowing for about 2,850 kilometres.
- The Danube rises in the Black Forest in Germany and empties into the Black Sea through a large
  delta in Romania and Ukraine.
- It flows through or along the borders of ten countries, more than any other river in the
  world.
- Four capital cities lie on its banks: Vienna, Bratislava, Budapest and Belgrade.
- For centuries the river has been an important route for trade and travel.
[e:Nile]
- name=the Nile
- def=a major river of northeastern Africa
- It is often regarded as the longest river in the world, at roughly 6,650 kilometres.
- Its two main tributaries are the White Nile and the Blue Nile, which meet at Khartoum in Sudan.
- The annual flood of the Nile deposited fertile silt that made farming in ancient Egypt
  possible.
- The Aswan High Dam, completed in 1970, now controls the flooding and generates electricity.
- The river flows northwards and empties into the Mediterranean Sea through a wide delta.
[e:Amazon River]
- name=the Amazon
- def=a major river of South America
- It carries more water than any other river in the world.
- The Amazon basin contains the largest tropical rainforest on Earth.
- The river rises in the Andes of Peru and flows east across Brazil to the Atlantic Ocean.
- Its discharge is so large that fresh water can be detected far out to sea beyond its mouth.
- The basin is home to an extraordinary diversity of fish, plants and other wildlife.
[e:Rhine]
- name=the Rhine
- def=a major river of Western Europe
- It rises in the Swiss Alps and flows to the North Sea in the Netherlands.
- The Rhine is about 1,230 kilometres long and passes through or along Switzerland,
  Liechtenstein, Austria, Germany, France and the Netherlands.
- It is one of the busiest inland waterways in the world, carrying large volumes of freight.
- The Middle Rhine valley, with its castles and vineyards, is a UNESCO World Heritage Site.
- Major cities on the river include Basel, Strasbourg, Cologne and Düsseldorf.
[e:Mekong]
- name=the Mekong
- def=a major river of Southeast Asia
- It rises on the Tibetan Plateau and flows through China, Myanmar, Laos, Thailand, Cambodia and
  Vietnam.
- The Mekong is roughly 4,900 kilometres long.
- Its lower basin supports one of the largest inland fisheries in the world.
- In Vietnam the river divides into many channels to form the Mekong Delta, a major rice-growing
  region.
- Dams built for hydroelectric power have changed its flow and sediment load in recent decades.
[e:Mississippi River]
- name=the Mississippi
- def=a major river of the United States
- It is the chief river of the largest drainage system in North America.
- The Mississippi rises at Lake Itasca in Minnesota and flows south to the Gulf of Mexico.
- Together with its major tributary, the Missouri, it forms one of the longest river systems in
  the world.
- The river has long been a vital transport route for agricultural and industrial goods.
- Its delta in Louisiana is built from sediment carried down from the interior of the continent.

[general:crop]
- Farmers select varieties of {name} suited to their local climate, soil and market.
- Plant breeders have developed varieties of {name} with higher yields and better resistance to
  pests and diseases.
- The crop is traded internationally, and its price affects food costs in many countries.
- Research stations around the world maintain collections of {name} varieties to preserve
  genetic diversity.
- Crop rotation helps to reduce the build-up of pests and diseases where {name} is grown.
- Changes in temperature and rainfall are expected to affect where {name} can be grown in the
  future.
- Traditional dishes based on {name} are part of the cultural heritage of many regions.
- Storage and processing after harvest determine how much of the crop reaches consumers in good
  condition.
[e:Wheat]
- name=wheat
- def=a cereal grass cultivated worldwide for its grain
- It was among the first crops to be domesticated, in the Fertile Crescent of the Middle East
  around ten thousand years ago.
- Wheat flour is the main ingredient of bread, pasta and many baked goods.
- Gluten proteins in wheat give dough its elasticity.
- Winter wheat is sown in autumn and harvested the following summer, while spring wheat is sown
  in spring.
- It is grown on more land area than any other food crop.
[e:Rice]
- name=rice
- def=a cereal grain that is the staple food for more than half of the world's population
- Rice was domesticated in Asia, and a separate species was domesticated in West Africa.
- Most rice is grown in flooded fields called paddies, which help to suppress weeds.
- Asian countries, led by China and India, produce the great majority of the world's rice.
- Brown rice keeps its bran layer, while white rice has had it removed by milling.
- The plant needs plenty of water and warm temperatures during its growing season.
[e:Maize]
- name=maize
- def=a cereal grain first domesticated by indigenous peoples in southern Mexico
- It was domesticated from a wild grass called teosinte roughly nine thousand years ago.
- Maize is now one of the most widely grown crops in the world.
- Much of the harvest is used as animal feed and for the production of ethanol, starch and oil.
- Sweetcorn is a variety eaten fresh, while other varieties are dried and ground into meal.
- The plant produces separate male and female flowers, the tassel and the ear.
[e:Potato]
- name=the potato
- def=the starchy tuber of a plant in the nightshade family
- The potato was domesticated in the Andes of South America several thousand years ago.
- Spanish explorers brought it to Europe in the second half of the sixteenth century.
- The tubers are rich in carbohydrate and also provide vitamin C and potassium.
- Dependence on a few varieties contributed to the Irish famine of the 1840s, when potato blight
  destroyed the crop.
- Potatoes are usually grown from seed tubers rather than true seed.
[e:Barley]
- name=barley
- def=a cereal grain grown in temperate climates around the world
- It was one of the first grains to be domesticated, in the Fertile Crescent.
- Barley tolerates cold, drought and poor soils better than many other cereals.
- Much of the crop is used for animal feed, and a significant share is malted for brewing and
  distilling.
- Pearl barley, with the husk and bran removed, is used in soups and stews.
- Barley has been found at some of the oldest known farming settlements.
[e:Cassava]
- name=cassava
- def=a woody shrub grown for its starchy root
- It is native to South America and is now widely grown in tropical Africa and Asia.
- Cassava tolerates drought and poor soils, making it an important food security crop.
- Raw cassava contains compounds that can release cyanide, so it must be processed by peeling,
  soaking or cooking.
- Tapioca is a starch extracted from cassava roots.
- The roots can be left in the ground for months and harvested when needed.

[general:instrument]
- Learning {name} usually begins with posture, tone production and simple scales.
- The sound of {name} depends on the materials, the construction and the skill of the player.
- Makers of {name} combine traditional craftsmanship with modern techniques and materials.
- Music for {name} ranges from early works to contemporary compositions and popular songs.
- Many well-known performers have helped to shape how {name} is played today.
- Regular maintenance, such as cleaning and adjustment, keeps an instrument in good playing
  condition.
- Students often take graded examinations to measure their progress on {name}.
- Recording technology has made performances on {name} available to audiences around the world.
[e:Violin]
- name=the violin
- def=a bowed string instrument with four strings tuned in perfect fifths
- It is the smallest and highest-pitched member of the violin family, which also includes the
  viola, cello and double bass.
- The modern violin took shape in northern Italy in the sixteenth century.
- Makers in Cremona, including Antonio Stradivari, produced instruments that are still prized
  today.
- The player holds the instrument under the chin and draws a bow strung with horsehair across the
  strings.
- The violin plays a leading role in orchestras, string quartets and many folk traditions.
[e:Piano]
- name=the piano
- def=a keyboard instrument in which hammers strike strings when keys are pressed
- It was invented in Italy around 1700 by Bartolomeo Cristofori.
- Its original name, pianoforte, refers to its ability to play both soft and loud.
- A modern piano usually has eighty-eight keys covering just over seven octaves.
- Pianos are built in two main forms, the grand piano with horizontal strings and the upright
  piano with vertical strings.
- The instrument is widely used for solo performance, accompaniment and composition.
[e:Flute]
- name=the flute
- def=a woodwind instrument that produces sound when air is blown across an opening
- Unlike most woodwinds, the modern concert flute has no reed.
- Flutes are among the oldest known musical instruments, with examples made of bone dating back
  tens of thousands of years.
- The modern key system was largely developed by Theobald Boehm in the nineteenth century.
- The piccolo is a smaller flute that plays an octave higher.
- The flute is held horizontally, to the right of the player.
[e:Trumpet]
- name=the trumpet
- def=a brass instrument with a bright, penetrating tone
- Sound is produced by buzzing the lips into a cup-shaped mouthpiece.
- Valves, introduced in the early nineteenth century, allow the player to produce a full
  chromatic scale.
- Trumpets appear in orchestras, military bands and jazz ensembles.
- Earlier natural trumpets without valves could play only a limited series of notes.
- The most common modern trumpet is pitched in B-flat.
[e:Cello]
- name=the cello
- def=a bowed string instrument played while seated, with the instrument held between the knees
- It is larger than the violin and viola and has a deeper range.
- Its four strings are tuned an octave below those of the viola.
- The cello rests on the floor on an adjustable metal spike called the endpin.
- Composers have written a large solo repertoire for it, including suites for unaccompanied
  cello.
- In the orchestra, cellos often provide the bass line together with the double basses.
[e:Guitar]
- name=the guitar
- def=a plucked string instrument that usually has six strings
- Classical guitars use nylon strings, while acoustic steel-string and electric guitars use metal
  strings.
- Frets on the neck divide the strings into fixed intervals.
- The electric guitar, which uses pickups and an amplifier, became central to popular music in
  the twentieth century.
- The modern classical guitar developed in Spain in the nineteenth century.
- Guitars are played by strumming chords or plucking individual notes.

[general:mammal]
- Field studies of {name} rely on direct observation, camera traps and, increasingly, genetic
  samples.
- The behaviour of {name} changes with the seasons and with the availability of food.
- Like other mammals, {name} feeds its young on milk.
- Conservation organisations monitor populations of {name} to detect changes over time.
- Human activity affects {name} through changes in land use, pollution and climate.
- The animal appears in folklore, art and literature in many of the regions where it lives.
- Scientists classify {name} on the basis of its anatomy, genetics and evolutionary history.
- Protected areas play an important role in maintaining healthy populations.
[e:Red fox]
- name=the red fox
- def=a carnivorous mammal of the dog family
- It has the widest geographical range of any wild carnivore, across the Northern Hemisphere and
  in Australia, where it was introduced.
- Red foxes are adaptable omnivores that eat small mammals, birds, insects, fruit and scraps.
- They often live in towns and cities as well as in the countryside.
- Foxes communicate with a wide range of barks, screams and scent marks.
- Young foxes, called kits or cubs, are born in spring in an underground den.
[e:African elephant]
- name=the African elephant
- def=a large herbivorous mammal native to sub-Saharan Africa
- It is the largest living land animal.
- Two species are recognised, the African bush elephant and the smaller African forest elephant.
- Elephants live in family groups led by an older female, known as the matriarch.
- The trunk, a fusion of the nose and upper lip, is used for breathing, smelling, drinking and
  grasping.
- Poaching for ivory and loss of habitat are the main threats to their survival.
[e:Blue whale]
- name=the blue whale
- def=a marine mammal belonging to the baleen whales
- It is the largest animal known ever to have existed.
- Blue whales feed almost entirely on small crustaceans called krill, which they filter from the
  water.
- Their low-frequency calls can travel over great distances underwater.
- Commercial whaling in the twentieth century brought the species close to extinction.
- International protection has allowed some populations to recover slowly.
[e:Brown bear]
- name=the brown bear
- def=a large bear found across much of northern Eurasia and North America
- It is one of the largest living land carnivores, although in many areas its diet is largely
  plant-based.
- Brown bears spend the winter in dens, where they enter a state of dormancy.
- The grizzly bear of North America is a population of the brown bear.
- Salmon runs provide an important source of food for bears in coastal regions.
- Cubs stay with their mother for two to three years.
[e:European hedgehog]
- name=the European hedgehog
- def=a small spiny mammal native to western Europe
- Its back is covered with several thousand sharp spines, which are modified hairs.
- When threatened, the hedgehog rolls into a tight ball.
- Hedgehogs are mostly nocturnal and feed on beetles, caterpillars, earthworms and other
  invertebrates.
- They hibernate during the colder months.
- Populations have declined in many areas because of habitat loss and road traffic.
[e:Giant panda]
- name=the giant panda
- def=a bear native to the mountain forests of south-central China
- Its diet consists almost entirely of bamboo.
- The panda has an enlarged wrist bone that works like a thumb to help it grip bamboo stems.
- Giant pandas are largely solitary animals.
- Conservation efforts, including protected reserves, have helped the wild population to
  increase.
- The species has become an international symbol of wildlife conservation.

[general:invention]
- The history of {name} shows how an invention develops through many small improvements.
- Inventors built on the work of earlier craftsmen and scientists, so the origin of {name} is
  rarely the achievement of a single person.
- The spread of {name} changed daily life and work in ways its early makers could not have
  predicted.
- Museums of science and technology preserve early examples of {name}.
- Patents, workshop records and letters allow historians to reconstruct how {name} was
  developed.
- Later versions of {name} used new materials and manufacturing methods.
- The economic impact of {name} depended on the availability of skilled workers and suitable
  materials.
- Today {name} is studied as part of the history of science and engineering.
[e:Printing press]
- name=the printing press
- def=a device for applying pressure to an inked surface to transfer text or images onto paper
- Johannes Gutenberg developed a printing system with movable metal type in Mainz around 1440.
- The press allowed books to be produced far more quickly and cheaply than by hand copying.
- Printing spread rapidly across Europe in the second half of the fifteenth century.
- It helped to spread literacy, scientific knowledge and new religious and political ideas.
- Earlier forms of printing with woodblocks and movable type had been developed in East Asia.
[e:Telescope]
- name=the telescope
- def=an optical instrument that makes distant objects appear nearer
- The first telescopes were made in the Netherlands in the early seventeenth century.
- Galileo Galilei used an improved telescope to observe the moons of Jupiter and the phases of
  Venus.
- Refracting telescopes use lenses, while reflecting telescopes use curved mirrors.
- Isaac Newton built one of the first practical reflecting telescopes.
- Modern telescopes observe not only visible light but also radio waves, infrared and X-rays.
[e:Steam engine]
- name=the steam engine
- def=a machine that uses steam to perform mechanical work
- Thomas Newcomen built an early steam engine in 1712 to pump water from mines.
- James Watt's improvements, including a separate condenser, greatly increased its efficiency.
- Steam engines powered factories, locomotives and ships during the Industrial Revolution.
- The engine converts the heat of burning fuel into motion by allowing steam to expand against a
  piston.
- Steam turbines, a later development, still generate much of the world's electricity.
[e:Telephone]
- name=the telephone
- def=a device that converts sound into electrical signals and back again, allowing people to
  speak at a distance
- Alexander Graham Bell received a patent for the telephone in 1876.
- Several inventors worked on similar ideas at the same time, and the question of priority was
  disputed.
- Early telephones were connected through manual switchboards operated by people.
- Automatic exchanges and later digital networks made calls faster and cheaper.
- Mobile phones, which communicate by radio, have largely replaced fixed lines in many countries.
[e:Bicycle]
- name=the bicycle
- def=a human-powered vehicle with two wheels, one behind the other
- An early ancestor, a running machine without pedals, was built by Karl Drais in 1817.
- Pedals attached to the front wheel appeared in the 1860s.
- The safety bicycle, with a chain drive and wheels of equal size, became popular in the 1880s.
- Pneumatic tyres made cycling far more comfortable.
- Bicycles are used for transport, recreation, sport and delivery work around the world.
[e:Compass]
- name=the compass
- def=an instrument that shows direction relative to the geographic cardinal directions
- The magnetic compass uses a magnetised needle that aligns with the Earth's magnetic field.
- It was first used for navigation in China, and by the thirteenth century it was in use in
  Europe.
- The compass allowed sailors to navigate when the Sun and stars were hidden.
- Magnetic north differs from true north, and the difference, called declination, varies from
  place to place.
- Gyrocompasses and satellite navigation have supplemented the magnetic compass on modern ships.

[general:language]
- Programs written in {name} are turned into executable form by a compiler or an interpreter.
- The design of {name} reflects trade-offs between performance, safety and ease of use.
- A community of developers maintains libraries, tools and documentation for {name}.
- Textbooks and university courses have introduced many programmers to {name}.
- Like other languages, {name} has evolved through revisions that add features while trying to
  keep older code working.
- Software written in {name} runs on a wide range of hardware, from small devices to large
  servers.
- Comparisons between {name} and other languages often focus on speed, expressiveness and the
  risk of programming errors.
- Style guides and automated tools help programmers write consistent code in {name}.
[e:C (programming language)]
- name=C
- def=a general-purpose programming language created by Dennis Ritchie at Bell Labs in the early
  1970s
- It was developed alongside the Unix operating system, much of which was rewritten in C.
- C provides low-level access to memory through pointers while remaining portable across
  machines.
- The language has been standardised by ANSI and ISO, with revisions such as C99 and C11.
- Many operating systems, embedded systems and language runtimes are written in C.
- Its syntax influenced many later languages, including C++, Java and C#.
[e:Python (programming language)]
- name=Python
- def=a high-level, general-purpose programming language created by Guido van Rossum
- The first version was released in 1991.
- Python emphasises readability and uses indentation to mark blocks of code.
- It supports several programming styles, including procedural, object-oriented and functional
  programming.
- A large standard library and many third-party packages make it popular for data analysis,
  scientific computing and web development.
- Its name comes from the British comedy group Monty Python.
[e:Java (programming language)]
- name=Java
- def=a general-purpose, object-oriented programming language first released by Sun
  Microsystems in 1995
- Programs are compiled to bytecode that runs on the Java Virtual Machine.
- The principle of writing a program once and running it anywhere was central to its design.
- Java is widely used for enterprise software, Android applications and large server systems.
- Automatic memory management through garbage collection removes the need to free memory by
  hand.
- James Gosling led the team that designed the language.
[e:Lisp]
- name=Lisp
- def=a family of programming languages with a distinctive syntax based on parenthesised lists
- It was designed by John McCarthy in 1958, making it one of the oldest high-level languages
  still in use.
- In Lisp, program code is written as data structures that the language itself can manipulate.
- Lisp pioneered ideas such as garbage collection, dynamic typing and the read-eval-print loop.
- Common Lisp, Scheme and Clojure are among its best-known dialects.
- It was closely associated with early research in artificial intelligence.
[e:Fortran]
- name=Fortran
- def=a programming language designed for numerical and scientific computing
- It was developed at IBM by a team led by John Backus, and the first compiler appeared in 1957.
- Its name is derived from Formula Translation.
- Fortran remains in use for weather forecasting, physics simulations and other demanding
  calculations.
- Modern versions of the language support array operations, modules and parallel programming.
- Many benchmark programs for supercomputers are still written in Fortran.
[e:Rust (programming language)]
- name=Rust
- def=a systems programming language focused on safety, speed and concurrency
- It began as a personal project of Graydon Hoare and was later sponsored by Mozilla.
- Version 1.0 was released in 2015.
- Its ownership system lets the compiler check memory safety without a garbage collector.
- Rust is used for operating system components, web browsers, command-line tools and network
  services.
- The language has a package manager and build tool called Cargo.

[general:mountain]
- The rocks of {name} record a long history of geological change.
- Weather on {name} can change quickly, and conditions near the summit are often much harsher
  than in the valleys below.
- Mountaineers and scientists have studied {name} for well over a century.
- The mountain attracts climbers, walkers and photographers from around the world.
- Rescue services and guides in the surrounding region have long experience of the mountain.
- Plants and animals on the lower slopes are adapted to conditions very different from those near
  the summit.
- Visitors are encouraged to acclimatise gradually to reduce the risk of altitude sickness.
- Protecting the mountain environment from litter and erosion is a growing concern as visitor
  numbers rise.
[e:Mount Everest]
- name=Mount Everest
- def=a mountain in the Himalayas on the border between Nepal and the Tibet Autonomous Region of
  China
- At 8,849 metres above sea level, it is the highest mountain on Earth.
- Edmund Hillary and Tenzing Norgay made the first confirmed ascent in May 1953.
- In Nepal the mountain is known as Sagarmatha, and in Tibet as Chomolungma.
- Climbers face extreme cold, strong winds and low oxygen levels near the summit.
- Hundreds of people now attempt the climb each year, most of them during a short spring season.
[e:Kilimanjaro]
- name=Kilimanjaro
- def=a dormant volcano in northeastern Tanzania
- At about 5,895 metres, it is the highest mountain in Africa.
- It is made up of three volcanic cones, named Kibo, Mawenzi and Shira.
- Its summit glaciers have shrunk considerably during the twentieth and twenty-first centuries.
- The climb passes through several climate zones, from farmland and rainforest to alpine desert.
- Hans Meyer and Ludwig Purtscheller reached the summit in 1889.
[e:Mont Blanc]
- name=Mont Blanc
- def=the highest mountain in the Alps, on the border between France and Italy
- Its summit stands at roughly 4,805 metres, although the height varies slightly with the
  thickness of the ice cap.
- Jacques Balmat and Michel-Gabriel Paccard made the first ascent in 1786, an event often seen as
  the birth of mountaineering.
- The Mont Blanc Tunnel, opened in 1965, links Chamonix in France with Courmayeur in Italy.
- The Tour du Mont Blanc is a popular long-distance walking route around the massif.
[e:Denali]
- name=Denali
- def=the highest mountain in North America, in the Alaska Range
- Its summit rises to about 6,190 metres above sea level.
- Measured from base to peak, it is one of the tallest mountains on land.
- Hudson Stuck led the first ascent of the main summit in 1913.
- The mountain lies within Denali National Park and Preserve.
- Its northern location makes weather on the upper slopes extremely cold.
[e:Aconcagua]
- name=Aconcagua
- def=a mountain in the Andes in the Argentine province of Mendoza
- At about 6,960 metres, it is the highest mountain in the Americas and outside Asia.
- Matthias Zurbriggen reached the summit in 1897.
- The normal route is not technically difficult, but altitude and weather make it a serious
  undertaking.
- The mountain lies within a provincial park, and climbers need a permit.
[e:Matterhorn]
- name=the Matterhorn
- def=a mountain in the Alps on the border between Switzerland and Italy
- It rises to 4,478 metres and is known for its nearly symmetrical pyramid shape.
- Edward Whymper's party made the first ascent in 1865, and four of its members died on the
  descent.
- The Swiss village of Zermatt lies at its foot.
- Its image is widely used as a symbol of the Alps and of Switzerland.

[general:organ]
- The {name} works closely with other organs, and problems in one system often affect others.
- Doctors assess the health of the {name} through physical examination, blood tests and imaging.
- Medical research continues to improve the treatment of diseases affecting the {name}.
- The structure of the {name} can be seen in detail with modern imaging methods.
- Anatomists have described the {name} since ancient times, but many of its functions were
  understood only in the last few centuries.
- Comparisons with other animals show how the {name} has changed over the course of evolution.
- Textbooks of physiology describe the {name} in terms of both its structure and its function.
- A balanced diet and regular exercise support the health of the {name} and of the body as a
  whole.
[e:Heart]
- name=heart
- def=a muscular organ that pumps blood through the circulatory system
- In humans it has four chambers, two atria and two ventricles.
- The right side of the heart pumps blood to the lungs, and the left side pumps it to the rest of
  the body.
- Valves between the chambers keep blood flowing in one direction.
- An electrical signal from the sinoatrial node sets the rhythm of each heartbeat.
- At rest, an adult heart typically beats between sixty and one hundred times a minute.
[e:Liver]
- name=liver
- def=a large organ in the upper right part of the abdomen
- It is the largest internal organ in the human body.
- The liver processes nutrients absorbed from the intestine and stores glycogen.
- It produces bile, which helps to digest fats.
- It also breaks down many drugs and toxins.
- The liver has a remarkable ability to regenerate after injury.
[e:Brain]
- name=brain
- def=the organ that serves as the centre of the nervous system
- The human brain contains tens of billions of nerve cells called neurons.
- Its largest part, the cerebrum, is divided into two hemispheres.
- The cerebellum helps to coordinate movement and balance.
- The brainstem controls basic functions such as breathing and heart rate.
- Although it makes up only about two percent of body weight, the brain uses around a fifth of the
  body's energy at rest.
[e:Skin]
- name=skin
- def=the organ that covers the outside of the body
- By area and weight, it is the largest organ of the human body.
- It has three main layers, the epidermis, the dermis and the subcutaneous tissue.
- The skin protects the body against infection, injury and water loss.
- Sweat glands and blood vessels in the skin help to regulate body temperature.
- Cells in the skin make vitamin D when they are exposed to ultraviolet light.
[e:Stomach]
- name=stomach
- def=a muscular organ of the digestive system between the oesophagus and the small intestine
- It stores food and begins the digestion of proteins.
- Glands in the stomach lining secrete hydrochloric acid and digestive enzymes.
- A layer of mucus protects the stomach wall from its own acid.
- Muscular contractions mix food with gastric juice to form a semi-liquid called chyme.
- Food usually remains in the stomach for a few hours before passing into the small intestine.
[e:Pancreas]
- name=pancreas
- def=a gland organ located behind the stomach
- It has both digestive and hormonal functions.
- Its exocrine cells produce enzymes that help to digest proteins, fats and carbohydrates.
- Clusters of cells called the islets of Langerhans release hormones such as insulin and
  glucagon.
- Insulin and glucagon work together to regulate the level of sugar in the blood.
- Diabetes can result when the pancreas produces too little insulin or the body responds poorly
  to it.
""")

# Organs read "The heart is ...": their names take the article in the opening sentence only.
_ARTICLE_IN_LEAD = "organ"

_FIELDS = {
    "element": "chemistry", "planet": "astronomy", "river": "physical geography",
    "crop": "agriculture", "instrument": "music", "mammal": "zoology",
    "invention": "the history of technology", "language": "computer science",
    "mountain": "geography", "organ": "human anatomy",
}

# Sentences any family can use; they make articles longer without sharing whole paragraphs.
CONTEXT = Bank.parse("context", "en", """
[sentences]
- {Subject} is described in most general reference works on {field}, usually alongside related
  subjects.
- Introductory courses in {field} often use {subject} as an example because it illustrates
  several basic principles.
- Specialists in {field} continue to publish new research on {subject} each year.
- Public interest in {subject} has grown with popular books, documentaries and museum
  exhibitions.
- The terminology used to describe {subject} varies slightly between languages and scientific
  traditions.
- Summaries such as this one give only an outline, and specialist sources provide much more
  detail.
- Several statements made about {subject} in older sources have been refined by later work.
- Standard textbooks in {field} discuss {subject} in relation to comparable examples.
- Libraries and archives hold a large body of writing about {subject}, from early descriptions to
  recent surveys.
- Debates among specialists about {subject} tend to concern details rather than the basic facts
  set out here.
""").get("sentences")


def _subjects() -> list[tuple[str, str, dict[str, str], tuple[str, ...]]]:
    """(family, title, fields, facts) for every subject, in the order written."""
    family = ""
    subjects = []
    for section, items in FAMILIES.sections.items():
        if section.startswith("general:"):
            family = section.removeprefix("general:")
            continue
        fields = dict(item.split("=", 1) for item in items if "=" in item.split(" ", 1)[0])
        facts = tuple(item for item in items if "=" not in item.split(" ", 1)[0])
        subjects.append((family, section.removeprefix("e:"), fields, facts))
    return subjects


def _article(
    rng: random.Random, family: str, fields: dict[str, str], facts: tuple[str, ...]
) -> str:
    name = fields["name"]
    subject = f"the {name}" if family == _ARTICLE_IN_LEAD else name
    general = [s.replace("{name}", name) for s in FAMILIES.get(f"general:{family}")]
    rng.shuffle(general)
    lead = f"{capitalise(subject)} is {fields['def']}."
    split = rng.randint(2, 3)
    paragraphs = [
        " ".join([lead, *facts[:split]]),
        " ".join(facts[split:]),
    ]
    cut = rng.randint(3, len(general) - 3)
    paragraphs += [" ".join(general[:cut]), " ".join(general[cut:])]
    context = rng.sample(CONTEXT, rng.randint(3, 7))
    paragraphs.append(" ".join(_context(s, subject, family) for s in context))
    return "\n\n".join(paragraphs)


def _context(sentence: str, subject: str, family: str) -> str:
    return (
        sentence.replace("{Subject}", capitalise(subject))
        .replace("{subject}", subject)
        .replace("{field}", _FIELDS[family])
    )


def build_reference(rng: random.Random) -> list[dict[str, str]]:
    """Sixty reference articles as JSON-ready rows with `id`, `title` and `text`."""
    rows = []
    for number, (family, title, fields, facts) in enumerate(_subjects()):
        text = _article(rng, family, fields, facts)
        rows.append({"id": f"reference-{number:04d}", "title": title, "text": text})
    return rows
