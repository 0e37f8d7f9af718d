"""German, French, Spanish, Japanese and Russian sentence banks, written for this sample.

They are smaller than the English banks because the sample holds fewer pages in these
languages; the same slot rules apply (`{item}` fixed per page, `{price}` a generated look-alike).
"""

from __future__ import annotations

from curation.sample.bank import Bank

DE_HIKING = Bank.parse("de_hiking", "de", """
[titles]
- Tourenbericht: Rundweg über den {item}
- Zwei Tage am {item}: unsere Erfahrungen
- Mit Kindern auf den {item}: lohnt sich das?
- Die schönste Herbstwanderung am {item}
[headings]
- Anreise
- Der Weg
- Ausrüstung
- Einkehr
- Fazit
[intros]
- Viele Leserinnen und Leser haben nach dieser Tour gefragt, deshalb gibt es heute einen
  ausführlichen Bericht.
- Diese Wanderung stand schon lange auf unserer Liste, und im {month} hat es endlich geklappt.
[closings]
- Wenn ihr Fragen zur Tour habt, schreibt sie gern in die Kommentare.
- Wir freuen uns schon auf die nächste Tour und berichten bald wieder.
[sentences]
- Wir sind kurz nach sieben Uhr am Wanderparkplatz losgegangen und hatten den Weg fast für uns
  allein.
- Der Aufstieg ist zunächst steil, führt dann aber angenehm durch einen lichten Bergwald.
- Nach etwa zwei Stunden erreichten wir die Alm, wo es frische Milch und selbstgebackenen Kuchen
  gab.
- Gutes Schuhwerk ist hier Pflicht, denn der Abstieg über loses Geröll ist bei Nässe rutschig.
- Oben am Gipfelkreuz hatten wir eine herrliche Aussicht bis weit in die Nachbartäler.
- Insgesamt sind wir rund {km} Kilometer gelaufen und haben dabei etwa {metres} Höhenmeter
  überwunden.
- Das Wetter in den Bergen kann schnell umschlagen, deshalb gehören Regenjacke und eine warme
  Schicht immer in den Rucksack.
- Mit Kindern sollte man mehr Zeit einplanen und unterwegs genügend Pausen machen.
- Die Hütte ist von Mai bis Oktober bewirtschaftet, eine Reservierung für die Übernachtung ist
  aber dringend zu empfehlen.
- Wer lieber kürzer wandert, kann an der Weggabelung den bequemeren Forstweg zurück ins Tal
  nehmen.
- Unterwegs begegneten uns Gämsen, und über dem Grat kreiste lange ein Steinadler.
- Trinkwasser gibt es nur an der Hütte, also unbedingt genug Wasser mitnehmen.
- Der Bus zum Ausgangspunkt fährt am Wochenende stündlich, unter der Woche aber nur morgens und am
  späten Nachmittag.
- Die Markierungen sind gut, trotzdem hatten wir die Karte und die App zur Sicherheit dabei.
- Im Herbst leuchten die Lärchen goldgelb, und die Luft ist oft besonders klar.
- Nach dem Abstieg haben wir uns im Gasthof im Dorf eine Brotzeit und ein kühles Getränk gegönnt.
- Wanderstöcke schonen beim langen Abstieg die Knie, auch wenn man sie anfangs für überflüssig
  hält.
- Für trittsichere Wanderer ist die Tour ohne Probleme machbar, schwindelfrei sollte man
  allerdings sein.
- Bitte nehmt euren Müll wieder mit und bleibt auf den markierten Wegen, um die empfindliche
  Vegetation zu schonen.
- Vor der Tour lohnt sich ein Blick auf den Wetterbericht, besonders im Frühjahr und im Herbst.
- Die letzten Meter zum Gipfel sind mit einem Drahtseil gesichert, was vor allem bei Nässe
  beruhigend ist.
- Unser Fazit ist eindeutig: eine abwechslungsreiche Tour, die wir jederzeit wieder gehen würden.
- Am Einstieg gibt es einen kleinen Kiosk, der aber nur am Wochenende geöffnet hat.
- Der Pfad durch die Schlucht ist schmal, bei Gegenverkehr muss man kurz warten.
- Mittags haben wir an einem kleinen Bergsee gerastet und die Füße ins kalte Wasser gehalten.
- Für die Übernachtung auf der Hütte sollte man einen Hüttenschlafsack mitbringen.
- Ab dem Sattel wird der Weg felsiger, und man braucht gelegentlich die Hände.
- Am Abend gab es auf der Hütte Knödel, und wir saßen noch lange mit anderen Wanderern
  zusammen.
- Die Tour lässt sich mit einer Nacht auf der Hütte gut in zwei entspannte Etappen teilen.
[slot:item]
- Grünsteinkamm
- Hochfeldkogel
- Brunnkogel
- Falkenstein
- Schartenkopf
- Lärchenberg
[slot:km]
- 12
- 15
- 17
- 19
[slot:metres]
- 700
- 850
- 1.050
- 1.200
[slot:month]
- Mai
- Juni
- September
- Oktober
""")

DE_TECH = Bank.parse("de_tech", "de", """
[titles]
- So richten Sie {item} richtig ein
- Ratgeber: {item} Schritt für Schritt
- Häufige Fehler rund um {item} und wie man sie vermeidet
[headings]
- Vorbereitung
- Einrichtung
- Typische Probleme
- Unser Tipp
[sentences]
- Bevor Sie beginnen, sollten Sie alle wichtigen Daten sichern und die Zugangsdaten Ihres
  Anbieters bereitlegen.
- Die meisten Geräte lassen sich heute bequem über eine App oder die Weboberfläche im Browser
  einrichten.
- Ersetzen Sie unbedingt das voreingestellte Kennwort durch ein eigenes, langes Passwort.
- Updates schließen Sicherheitslücken, deshalb sollte die automatische Aktualisierung
  eingeschaltet bleiben.
- In vielen Wohnungen ist der beste Platz für den Router nicht der Flur, sondern eine zentrale,
  erhöhte Stelle.
- Dicke Wände und Fußbodenheizungen dämpfen das Funksignal stärker, als viele vermuten.
- Eine Datensicherung ist erst dann etwas wert, wenn man die Wiederherstellung mindestens einmal
  ausprobiert hat.
- Nach der Umstellung auf Version {version} lief bei uns alles stabil, nur eine Einstellung musste
  neu gesetzt werden.
- Bewährt hat sich die Regel von drei Kopien auf zwei verschiedenen Speichermedien, von denen eine
  außer Haus liegt.
- Wer Kinder hat, sollte Bildschirmzeiten gemeinsam besprechen, statt sich allein auf technische
  Sperren zu verlassen.
- Ein Passwortmanager nimmt Ihnen das Merken ab und erzeugt auf Wunsch sichere Zufallspasswörter.
- Falls die Verbindung abbricht, hilft oft schon ein Neustart von Router und Endgerät.
- Mesh-Systeme sind teurer als einfache Repeater, verteilen das Netz aber deutlich gleichmäßiger
  im Haus.
- Notieren Sie sich alle Änderungen, damit Sie später nachvollziehen können, was Sie eingestellt
  haben.
- Im Test kostete das Einsteigermodell {price} und reichte für eine vierköpfige Familie völlig
  aus.
- Die Anmeldung mit zwei Faktoren ist ein kleiner Mehraufwand, erhöht die Sicherheit Ihrer Konten
  aber erheblich.
- Ältere Geräte unterstützen die neuesten Standards oft nicht, laufen aber in einem separaten
  Gastnetz problemlos.
- Wenn Sie unsicher sind, fragen Sie den Kundendienst Ihres Anbieters, bevor Sie Einstellungen
  zurücksetzen.
- Planen Sie für die Einrichtung einen ruhigen Nachmittag ein und nehmen Sie sich Zeit.
- Viele Probleme entstehen nicht durch die Technik selbst, sondern durch vergessene Passwörter und
  fehlende Notizen.
- Viele Router bieten ein eigenes Gastnetz an, das Besucher vom Heimnetz trennt.
- Bei der Einrichtung hilft ein Blick in das Handbuch, auch wenn man das nur ungern tut.
- Achten Sie darauf, dass die Datensicherung automatisch und regelmäßig läuft.
- Wer mehrere Geräte nutzt, sollte die Einstellungen auf allen Geräten prüfen.
- Ein Neustart nach größeren Änderungen verhindert viele merkwürdige Fehler.
- Externe Festplatten sollten nach der Sicherung vom Rechner getrennt werden.
- Für die meisten Haushalte reicht ein Gerät der Mittelklasse völlig aus.
[slot:item]
- das WLAN im ganzen Haus
- eine automatische Datensicherung
- den neuen Router
- einen Netzwerkspeicher für die Familie
- die Kindersicherung am Tablet
- ein sicheres Passwortkonzept
""")

FR_COOKING = Bank.parse("fr_cooking", "fr", """
[titles]
- Recette facile : {item}
- {item} comme chez ma grand-mère
- {item} en trente minutes
- Notre version légère de {item}
[headings]
- Nos astuces
- Conservation
- Pour accompagner
[sentences]
- C'est une recette que je prépare souvent le dimanche, quand toute la famille se retrouve autour
  de la table.
- Le secret, c'est de prendre son temps et de laisser cuire doucement, à feu moyen.
- Vous pouvez préparer la pâte la veille et la garder au frais, bien emballée dans un film
  alimentaire.
- Choisissez des produits de saison : ils ont plus de goût et coûtent souvent moins cher.
- Pour une version plus légère, remplacez la crème par du lait ou du yaourt nature.
- Une pincée de muscade et un peu de poivre du moulin suffisent à relever le plat.
- Ce plat se conserve trois jours au réfrigérateur et se réchauffe très bien au four.
- Servez-le avec une salade verte bien assaisonnée et un bon morceau de pain.
- Ma grand-mère ajoutait toujours une feuille de laurier, et je n'ai jamais trouvé mieux.
- Les enfants peuvent participer à la préparation, par exemple en lavant les légumes ou en
  mélangeant la pâte.
- Le coût total pour quatre personnes est d'environ {price}, ce qui en fait un repas économique.
- Si la sauce est trop épaisse, ajoutez un peu d'eau ou de bouillon et mélangez bien.
- Goûtez avant de servir et rectifiez l'assaisonnement si nécessaire.
- Un plat en fonte garde bien la chaleur et donne un meilleur résultat qu'un moule trop fin.
- Laissez reposer quelques minutes avant de découper, les parts seront plus nettes.
- Cette recette se congèle facilement, alors pensez à en préparer une double portion.
- J'ai testé plusieurs variantes avant de publier celle-ci, qui fait l'unanimité à la maison.
- N'hésitez pas à me laisser un commentaire si vous essayez la recette, je lis tous vos messages.
- Le beurre doit être bien froid pour que la pâte reste croustillante après la cuisson.
- Préchauffez le four à 180 degrés pendant que vous préparez les ingrédients.
- Avec un verre de vin rouge léger, c'est le repas idéal pour une soirée d'hiver.
- On peut remplacer le lait de vache par une boisson végétale sans changer le résultat.
- Pensez à sortir les œufs du réfrigérateur une heure avant de commencer.
- Une cuillère de moutarde à l'ancienne apporte une note agréable à la sauce.
- Je conseille de doubler les quantités si vous recevez des amis, car il n'en reste jamais.
- Le lendemain, les restes font un excellent déjeuner à emporter.
- Une salade de mâche et quelques noix suffisent pour accompagner ce plat.
- Si vous n'avez pas de fouet, une simple fourchette fera l'affaire.
[steps]
- Épluchez et coupez les légumes en morceaux réguliers.
- Faites chauffer un filet d'huile dans une grande poêle.
- Ajoutez les oignons et laissez-les dorer doucement pendant dix minutes.
- Incorporez le reste des ingrédients et mélangez bien.
- Versez dans un plat beurré et enfournez pour trente minutes.
- Laissez tiédir avant de servir.
- Battez les œufs avec la crème dans un saladier.
- Salez, poivrez et ajoutez une pincée de muscade.
- Étalez la pâte dans un moule et piquez le fond avec une fourchette.
- Parsemez de fromage râpé avant d'enfourner.
[items]
- 500 g de pommes de terre
- 20 cl de crème fraîche
- 2 gousses d'ail
- 1 oignon
- 3 œufs
- 100 g de beurre
- 250 g de farine
- sel et poivre
- 1 feuille de laurier
- 50 cl de lait
- 1 cuillère à soupe de moutarde
- 200 g de lardons
- 1 pâte brisée
- 50 g de gruyère râpé
- 1 pincée de muscade
- 2 cuillères à soupe d'huile d'olive
[slot:item]
- le gratin dauphinois
- la quiche aux poireaux
- le clafoutis aux cerises
- la soupe à l'oignon
- le poulet basquaise
- la tarte aux pommes
- les crêpes de la Chandeleur
- le bœuf bourguignon
""")

FR_TRAVEL = Bank.parse("fr_travel", "fr", """
[titles]
- Un week-end à {item}
- Que faire à {item} en trois jours ?
- {item} hors saison : nos bonnes adresses
[headings]
- Comment y aller
- Où dormir
- À voir
- Où manger
- Nos conseils
[sentences]
- Nous sommes arrivés en train un vendredi soir, et la gare se trouve à dix minutes à pied du
  centre historique.
- La vieille ville se découvre à pied, de préférence tôt le matin avant l'arrivée des groupes.
- Notre petit hôtel coûtait {price} la nuit, petit-déjeuner compris, avec une vue sur les toits.
- Le marché couvert vaut le détour, même si vous n'avez rien à acheter.
- La plupart des musées sont fermés le lundi, alors pensez à vérifier les horaires avant de
  partir.
- Nous avons très bien mangé dans un petit restaurant familial où la carte changeait chaque jour.
- Une balade le long de la rivière au coucher du soleil reste notre meilleur souvenir du séjour.
- Hors saison, les prix baissent et les rues retrouvent leur calme, ce qui change tout.
- Le vélo est un excellent moyen de visiter les environs, et plusieurs loueurs proposent des
  tarifs à la journée.
- Réservez les visites guidées quelques jours à l'avance en été, car les places partent vite.
- Les habitants sont accueillants et toujours prêts à donner un conseil ou une bonne adresse.
- Nous avons goûté les spécialités locales à la boulangerie du coin, encore tièdes à la sortie du
  four.
- Prévoyez de bonnes chaussures, car beaucoup de rues sont pavées et parfois en pente.
- L'office de tourisme distribue un plan gratuit et la liste des animations de la semaine.
- Pour une escapade de trois jours, comptez environ {price} par personne, hors hébergement.
- Le point de vue en haut de la colline est gratuit et offre un panorama magnifique sur toute la
  région.
- Les concerts du soir dans les églises sont peu chers et très agréables après une longue journée.
- Nous reviendrons sans hésiter, peut-être au printemps pour voir les jardins en fleurs.
- Le samedi matin, le marché aux fleurs anime toute la place principale.
- Nous avons loué des vélos pour une demi-journée et longé le canal jusqu'au village voisin.
- Les ruelles du quartier ancien sont bordées de maisons colorées et de petites boutiques.
- Le soir, les terrasses se remplissent et l'ambiance est très conviviale.
- Un passe pour les musées permet d'économiser un peu si vous en visitez plusieurs.
- La cathédrale mérite une visite, même pour ceux qui ne s'intéressent pas à l'architecture.
[slot:item]
- Annecy
- Colmar
- Saint-Malo
- Arles
- Dijon
- Bayonne
- Nantes
""")

ES_COOKING = Bank.parse("es_cooking", "es", """
[titles]
- Receta fácil de {item}
- {item} como la hacía mi abuela
- Cómo preparar {item} en casa
[headings]
- Trucos
- Conservación
- Para acompañar
[sentences]
- Esta es una de las recetas más sencillas de nuestra cocina y siempre triunfa en las comidas
  familiares.
- El secreto está en cocinar la cebolla a fuego lento hasta que quede dulce y transparente.
- Usa un buen aceite de oliva virgen extra, porque se nota mucho en el sabor final.
- Puedes prepararla el día anterior y guardarla en la nevera bien tapada.
- Mi abuela siempre añadía una pizca de azúcar para corregir la acidez del tomate.
- Si te gusta más jugosa, retírala del fuego un minuto antes.
- Los ingredientes para cuatro personas cuestan alrededor de {price}, así que es una receta muy
  económica.
- Sirve el plato con un buen pan y una ensalada fresca.
- Prueba y rectifica de sal antes de servir.
- Los niños pueden ayudar a lavar las verduras y a remover la mezcla.
- Se conserva hasta tres días en la nevera y se puede congelar sin problema.
- En verano me gusta servirla bien fría, casi como un aperitivo.
- No tengas prisa, porque dejar reposar la masa unos minutos mejora mucho la textura.
- Hay tantas versiones como casas, y cada familia defiende la suya con pasión.
- Una sartén de buena calidad evita que se pegue y facilita darle la vuelta.
- Si no tienes caldo casero, uno comprado sirve perfectamente.
- He probado varias versiones antes de publicar esta, que es la favorita en casa.
- Déjame un comentario si la preparas, me encanta saber cómo os ha salido.
- Si quieres una versión vegetariana, sustituye el caldo de carne por uno de verduras.
- El pimentón de la Vera le da un toque ahumado que me encanta.
- Conviene usar tomates bien maduros, que tienen mucho más sabor.
- Esta receta es ideal para llevar al trabajo en un táper.
- Al día siguiente está incluso más rica, porque los sabores se asientan.
- Un chorrito de vinagre de Jerez al final realza todo el plato.
- Mis hijos la piden cada semana, así que siempre tengo los ingredientes en casa.
[steps]
- Pela y corta las patatas en rodajas finas.
- Calienta abundante aceite en una sartén grande.
- Añade la cebolla y cocina a fuego lento durante diez minutos.
- Bate los huevos con una pizca de sal.
- Mezcla todos los ingredientes y cuaja a fuego medio.
- Deja reposar unos minutos antes de servir.
- Sofríe el ajo picado sin que llegue a quemarse.
- Añade el tomate rallado y deja que se reduzca.
- Incorpora el caldo caliente poco a poco.
- Rectifica de sal y sirve enseguida.
[items]
- 4 patatas medianas
- 1 cebolla
- 6 huevos
- aceite de oliva virgen extra
- sal
- 2 dientes de ajo
- 500 g de tomates maduros
- 1 pimiento verde
- 200 g de lentejas
- 1 litro de caldo de verduras
- 1 cucharadita de pimentón
- 1 hoja de laurel
- 100 g de jamón
- pimienta negra
- 1 chorrito de vinagre
[slot:item]
- tortilla de patatas
- gazpacho andaluz
- paella de verduras
- crema de calabaza
- sopa de ajo
- pisto manchego
- ensalada de garbanzos
""")

ES_GARDENING = Bank.parse("es_gardening", "es", """
[titles]
- Cómo cultivar {item} en el balcón
- Guía básica para plantar {item}
- Nuestra cosecha de {item} este año
[headings]
- Dónde plantar
- El riego
- Plagas
- La cosecha
[sentences]
- La mayoría de las hortalizas necesitan al menos seis horas de sol directo al día.
- Una maceta de treinta litros es suficiente para obtener una buena cosecha en un balcón.
- Riega en profundidad dos o tres veces por semana en lugar de un poco cada día.
- En pleno verano conviene regar a primera hora de la mañana o al atardecer.
- Un acolchado de paja ayuda a mantener la humedad y reduce las malas hierbas.
- Los pulgones suelen aparecer en los brotes tiernos, y un chorro de agua suele bastar para
  eliminarlos.
- El compost casero mejora la estructura del suelo y alimenta a las plantas poco a poco.
- Apunta las fechas de siembra en un cuaderno, porque el año que viene no te acordarás.
- Plantar caléndulas cerca del huerto atrae insectos beneficiosos.
- Cosecha a menudo, ya que muchas plantas producen más cuando se recogen los frutos con
  regularidad.
- Las heladas tardías de primavera pueden arruinar las plántulas, así que protégelas con una
  tela.
- Un tutor de caña y una cuerda suave evitan que las plantas altas se doblen con el viento.
- Las semillas ecológicas cuestan un poco más, pero suelen dar plantas fuertes y sanas.
- Si las hojas inferiores amarillean, probablemente a la planta le falta nitrógeno.
- Compartir semillas con los vecinos es una forma estupenda de probar variedades nuevas.
- Con un poco de paciencia, incluso un balcón pequeño puede dar verduras durante todo el verano.
- Este año gastamos unos {price} en semillas y sustrato, y la cosecha compensó con creces.
- Las macetas de barro transpiran mejor, pero se secan antes que las de plástico.
- Un sistema de riego por goteo sencillo ahorra mucha agua y mucho tiempo.
- Conviene rotar los cultivos cada año para que la tierra no se agote.
- Las plantas aromáticas crecen bien en macetas pequeñas y atraen a las abejas.
- En otoño aprovechamos para limpiar las macetas y preparar la tierra para la primavera.
- Los restos de poda y las hojas secas se pueden añadir al compostador.
[slot:item]
- tomates cherry
- lechugas
- fresas
- pimientos
- albahaca
- calabacines
""")

JA_COOKING = Bank.parse("ja_cooking", "ja", """
[titles]
- 簡単{item}の作り方
- 今日の晩ごはん：{item}
- 忙しい日の{item}レシピ
[headings]
- ポイント
- 保存方法
- アレンジ
[sentences]
- 今日は家族みんなが大好きな{item}を作りました。
- 材料はスーパーで手に入るものばかりなので、思い立ったらすぐに作れます。
- 玉ねぎはじっくり炒めると甘みが出て、ぐっとおいしくなります。
- 味付けは少し薄めにしておき、最後に味を見て調整するのがおすすめです。
- 前の日に作っておくと、味がしみてさらにおいしくなります。
- 子どもと一緒に野菜を洗ったり切ったりするのも楽しい時間です。
- 冷蔵庫で三日ほど保存できるので、お弁当のおかずにもぴったりです。
- 火加減は中火を基本にして、焦げそうになったら弱めてください。
- 今回の材料費は四人分でおよそ{price}でした。
- 祖母から教わった作り方を、少しだけ今風にアレンジしています。
- 仕上げにごまをふると、香りがよくなり見た目も華やかになります。
- ご飯がすすむ味なので、つい食べ過ぎてしまうのが悩みです。
- 季節の野菜を加えると、彩りも栄養もアップします。
- 忙しい平日でも三十分ほどで完成するので、ぜひ試してみてください。
- 分量はあくまで目安なので、お好みで調整してくださいね。
- 作ってみた感想をコメントで教えていただけるとうれしいです。
- 鍋は厚手のものを使うと、焦げつきにくく失敗が少なくなります。
- 余った分は小分けにして冷凍しておくと便利です。
- 寒い日には、温かい料理が何よりのごちそうになります。
- 盛り付けを少し工夫するだけで、いつものおかずも特別な一皿に見えます。
- 今回は、冷蔵庫に残っていた野菜を使い切るために作りました。
- 調味料を合わせておくと、調理中にあわてずにすみます。
- 肉は常温に戻してから焼くと、やわらかく仕上がります。
- 辛いものが好きな方は、七味唐辛子を加えてもおいしいです。
- 夫は二杯もおかわりしてくれました。
- 冷めてもおいしいので、作り置きにも向いています。
- 煮込み時間を長くすると野菜がやわらかくなり、子どもでも食べやすくなります。
- 最初に強火で焼き色をつけてから、弱火にするのがコツです。
- 写真では色が濃く見えますが、味はやさしめです。
- だしは顆粒のものでも十分においしく作れます。
- 次回は、きのこを入れて秋らしいアレンジにしてみたいと思います。
- 週末にまとめて作っておくと、平日の夕食がぐっと楽になります。
- 薄切り肉を使うと火の通りが早く、時短になります。
- 味が決まらないときは、塩をほんのひとつまみ足してみてください。
- 食卓に一品あるだけで、家族の会話もはずみます。
- お弁当に入れるときは、汁気をよく切ってから詰めましょう。
[steps]
- 野菜を食べやすい大きさに切ります。
- 鍋に油を熱し、肉を炒めます。
- 野菜を加えてさらに炒めます。
- 調味料を入れて、弱火で十五分ほど煮込みます。
- 味を見て、足りなければしょうゆを少し加えます。
- 器に盛り付けて完成です。
- 鍋にだし汁を入れて火にかけます。
- 肉に軽く塩をふっておきます。
- ふたをして、中火で五分ほど蒸し焼きにします。
- 火を止めて、しばらく置いて味をなじませます。
[items]
- 豚肉 200g
- 玉ねぎ 1個
- にんじん 1本
- じゃがいも 3個
- しょうゆ 大さじ2
- みりん 大さじ2
- 砂糖 大さじ1
- だし汁 400ml
- ごま油 小さじ1
- 塩 少々
- 酒 大さじ1
- しょうが 1かけ
- ねぎ 1本
- 卵 2個
[slot:item]
- 肉じゃが
- 親子丼
- 味噌汁
- 野菜炒め
- カレーライス
- 鮭の塩焼き
- 豚の生姜焼き
""")

RU_HIKING = Bank.parse("ru_hiking", "ru", """
[titles]
- Поход выходного дня: {item}
- Как мы ходили на {item}
- {item}: маршрут, снаряжение и советы
[headings]
- Как добраться
- Маршрут
- Снаряжение
- Итоги
[sentences]
- Мы вышли рано утром, когда на тропе ещё никого не было.
- Первый подъём довольно крутой, но потом дорога идёт через светлый сосновый лес.
- Через два часа мы добрались до родника и устроили небольшой привал.
- Хорошая обувь здесь обязательна, потому что спуск по осыпи после дождя очень скользкий.
- С вершины открывается прекрасный вид на долину и соседние хребты.
- Всего мы прошли около {km} километров и набрали примерно {metres} метров высоты.
- Погода в горах меняется быстро, поэтому дождевик и тёплая куртка всегда должны быть в
  рюкзаке.
- С детьми лучше закладывать больше времени и чаще делать остановки.
- Воды на маршруте мало, так что берите с собой не меньше двух литров на человека.
- Маркировка на тропе хорошая, но карту и навигатор мы всё равно взяли с собой.
- Осенью лиственницы становятся золотыми, а воздух особенно прозрачный.
- Вечером мы поставили палатки у озера и долго сидели у костра.
- Треккинговые палки очень помогают на длинном спуске и берегут колени.
- Пожалуйста, уносите весь мусор с собой и не сходите с тропы.
- Автобус до начала маршрута ходит только утром, поэтому расписание лучше уточнить заранее.
- В целом маршрут несложный, но требует хорошей физической подготовки.
- По пути мы видели белок, а высоко над хребтом долго кружил орёл.
- Мы обязательно вернёмся сюда летом, чтобы пройти маршрут полностью.
- Билеты на электричку лучше покупать заранее, особенно в пятницу вечером.
- На ночёвку у озера стоит приходить засветло, чтобы спокойно выбрать место для палатки.
- Старт маршрута находится сразу за деревней, у старого моста.
- Первую ночь мы провели в палатке на поляне у ручья.
- На перевале дул сильный ветер, поэтому мы не стали там задерживаться.
- Продукты лучше заранее распределить между всеми участниками похода.
- Комары у воды были настоящим испытанием, так что не забывайте репеллент.
- Спуск занял почти столько же времени, сколько подъём.
- На обратном пути мы зашли в деревенское кафе и заказали горячий суп.
- Если погода испортится, с маршрута можно сойти по лесной дороге к посёлку.
- Фонарик пригодился уже в первый вечер, когда стемнело раньше, чем мы ожидали.
- Мобильная связь на маршруте есть только на вершинах и у посёлка.
- Для ночёвки в горах даже летом нужен тёплый спальник.
[slot:item]
- Серебряное озеро
- Медвежий перевал
- Каменный хребет
- Синий утёс
[slot:km]
- 14
- 18
- 22
[slot:metres]
- 600
- 900
- 1200
""")

TOPICS: dict[str, Bank] = {
    bank.key: bank
    for bank in (
        DE_HIKING, DE_TECH, FR_COOKING, FR_TRAVEL, ES_COOKING, ES_GARDENING, JA_COOKING,
        RU_HIKING,
    )
}
