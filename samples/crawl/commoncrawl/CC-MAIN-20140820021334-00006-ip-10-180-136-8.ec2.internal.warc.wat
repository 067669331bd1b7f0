WARC/1.0
WARC-Type: warcinfo
WARC-Date: 2014-09-09T10:14:59Z
WARC-Filename: CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz
WARC-Record-ID: <urn:uuid:e801b755-b208-4424-8233-b76f468155c6>
Content-Type: application/warc-fields
Content-Length: 108

Software-Info: ia-web-commons.1.0-SNAPSHOT-20140819100050
Extracted-Date: Tue, 09 Sep 2014 10:14:59 GMT



WARC/1.0
WARC-Type: metadata
WARC-Target-URI: CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz
WARC-Date: 2014-09-05T15:18:43Z
WARC-Record-ID: <urn:uuid:ae23f03c-932b-4767-8a47-199f1284a282>
WARC-Refers-To: <urn:uuid:cf083d66-9910-45e2-b5be-a421f9889aac>
Content-Type: application/json
Content-Length: 1178

{"Envelope":{"Format":"WARC","WARC-Header-Length":"273","Block-Digest":"sha1:P6VMFZQH6KPMHAYZ3VCWJYNYJLQETZS6","Actual-Content-Length":"371","WARC-Header-Metadata":{"WARC-Type":"warcinfo","WARC-Filename":"CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz","WARC-Date":"2014-09-05T15:18:43Z","Content-Length":"371","WARC-Record-ID":"<urn:uuid:cf083d66-9910-45e2-b5be-a421f9889aac>","Content-Type":"application/warc-fields"},"Payload-Metadata":{"Trailing-Slop-Length":"0","Actual-Content-Type":"application/warc-fields","Actual-Content-Length":"371","Headers-Corrupt":true,"WARC-Info-Metadata":{"robots":"classic","software":"Nutch 1.6 (CC)/CC WarcExport 1.0","description":"Wide crawl of the web with URLs provided by Blekko for August 2014","hostname":"ip-10-180-136-8.ec2.internal","format":"WARC File Format 1.0","isPartOf":"CC-MAIN-2014-35","operator":"CommonCrawl Admin","publisher":"CommonCrawl"}}},"Container":{"Compressed":true,"Gzip-Metadata":{"Footer-Length":"8","Deflate-Length":"454","Header-Length":"10","Inflated-CRC":"-759485782","Inflated-Length":"648"},"Offset":"0","Filename":"CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz"}}

WARC/1.0
WARC-Type: metadata
WARC-Target-URI: http://0.r.msn.com/?ld=7v7Pf0o6dfvcggjmXvvsEKhzVUCUxwxRmKzEhcbUqMsh2Ubu9FZw1vPvSOUQKjNaf9lLFIpVKW3sQMR6aOgbPhwm9WR843zZRpT1jbKN7YgaGETlBJG5fdKcfifIi9WSQu9hAx6A&u=www.sportsmanias.com%2Frumors
WARC-Date: 2014-08-21T04:21:14Z
WARC-Record-ID: <urn:uuid:acee58c7-9959-4c6e-af1d-28adeb0ade29>
WARC-Refers-To: <urn:uuid:9994d4fd-40b0-4d41-b1e7-1dc2a7ccb1e7>
Content-Type: application/json
Content-Length: 1694

{"Envelope":{"Format":"WARC","WARC-Header-Length":"507","Block-Digest":"sha1:DI5K5RNSGZ6YJAMJYLNTHAZ5JJLHRW7L","Actual-Content-Length":"422","WARC-Header-Metadata":{"WARC-Type":"request","WARC-Date":"2014-08-21T04:21:14Z","WARC-Warcinfo-ID":"<urn:uuid:cf083d66-9910-45e2-b5be-a421f9889aac>","Content-Length":"422","WARC-Record-ID":"<urn:uuid:9994d4fd-40b0-4d41-b1e7-1dc2a7ccb1e7>","WARC-Target-URI":"http://0.r.msn.com/?ld=7v7Pf0o6dfvcggjmXvvsEKhzVUCUxwxRmKzEhcbUqMsh2Ubu9FZw1vPvSOUQKjNaf9lLFIpVKW3sQMR6aOgbPhwm9WR843zZRpT1jbKN7YgaGETlBJG5fdKcfifIi9WSQu9hAx6A&u=www.sportsmanias.com%2Frumors","WARC-IP-Address":"65.52.108.2","Content-Type":"application/http; msgtype=request"},"Payload-Metadata":{"Trailing-Slop-Length":"4","HTTP-Request-Metadata":{"Headers":{"Accept-Language":"en-us,en-gb,en;q=0.7,*;q=0.3","Host":"0.r.msn.com","Accept-Encoding":"x-gzip, gzip, deflate","User-Agent":"CCBot/2.0 (http://commoncrawl.org/faq/)","Accept":"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},"Headers-Length":"420","Entity-Length":"0","Entity-Trailing-Slop-Bytes":"0","Request-Message":{"Method":"GET","Version":"HTTP/1.0","Path":"/?ld=7v7Pf0o6dfvcggjmXvvsEKhzVUCUxwxRmKzEhcbUqMsh2Ubu9FZw1vPvSOUQKjNaf9lLFIpVKW3sQMR6aOgbPhwm9WR843zZRpT1jbKN7YgaGETlBJG5fdKcfifIi9WSQu9hAx6A&u=www.sportsmanias.com%2Frumors"},"Entity-Digest":"sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"},"Actual-Content-Type":"application/http; msgtype=request"}},"Container":{"Compressed":true,"Gzip-Metadata":{"Footer-Length":"8","Deflate-Length":"557","Header-Length":"10","Inflated-CRC":"248420074","Inflated-Length":"933"},"Offset":"454","Filename":"CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz"}}

WARC/1.0
WARC-Type: metadata
WARC-Target-URI: http://0.r.msn.com/?ld=7v7Pf0o6dfvcggjmXvvsEKhzVUCUxwxRmKzEhcbUqMsh2Ubu9FZw1vPvSOUQKjNaf9lLFIpVKW3sQMR6aOgbPhwm9WR843zZRpT1jbKN7YgaGETlBJG5fdKcfifIi9WSQu9hAx6A&u=www.sportsmanias.com%2Frumors
WARC-Date: 2014-08-21T04:21:14Z
WARC-Record-ID: <urn:uuid:45da800f-8c1d-4a23-9442-b16aeef88906>
WARC-Refers-To: <urn:uuid:edad822f-2290-4827-a5ab-a52a60348461>
Content-Type: application/json
Content-Length: 1646

{"Envelope":{"Format":"WARC","WARC-Header-Length":"696","Block-Digest":"sha1:UHJK3TXZIQRATBF4CIGW33NQ4QAGTE4M","Actual-Content-Length":"174","WARC-Header-Metadata":{"WARC-Type":"response","WARC-Date":"2014-08-21T04:21:14Z","WARC-Warcinfo-ID":"<urn:uuid:cf083d66-9910-45e2-b5be-a421f9889aac>","Content-Length":"174","WARC-Record-ID":"<urn:uuid:edad822f-2290-4827-a5ab-a52a60348461>","WARC-Block-Digest":"sha1:UHJK3TXZIQRATBF4CIGW33NQ4QAGTE4M","WARC-Payload-Digest":"sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ","WARC-Target-URI":"http://0.r.msn.com/?ld=7v7Pf0o6dfvcggjmXvvsEKhzVUCUxwxRmKzEhcbUqMsh2Ubu9FZw1vPvSOUQKjNaf9lLFIpVKW3sQMR6aOgbPhwm9WR843zZRpT1jbKN7YgaGETlBJG5fdKcfifIi9WSQu9hAx6A&u=www.sportsmanias.com%2Frumors","WARC-IP-Address":"65.52.108.2","WARC-Concurrent-To":"<urn:uuid:9994d4fd-40b0-4d41-b1e7-1dc2a7ccb1e7>","Content-Type":"application/http; msgtype=response"},"Payload-Metadata":{"Trailing-Slop-Length":"4","Actual-Content-Type":"application/http; msgtype=response","HTTP-Response-Metadata":{"Headers":{"p3p":"CP=BUS CUR CONo FIN IVDo ONL OUR PHY SAMo TELo","Date":"Thu, 21 Aug 2014 04:21:14 GMT","Content-Length":"0","Connection":"close","Server":"Microsoft-IIS/8.0"},"Headers-Length":"174","Entity-Length":"0","Entity-Trailing-Slop-Bytes":"0","Response-Message":{"Status":"200","Version":"HTTP/1.1","Reason":"OK"},"Entity-Digest":"sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"}}},"Container":{"Compressed":true,"Gzip-Metadata":{"Footer-Length":"8","Deflate-Length":"638","Header-Length":"10","Inflated-CRC":"16556146","Inflated-Length":"874"},"Offset":"1011","Filename":"CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz"}}

WARC/1.0
WARC-Type: metadata
WARC-Target-URI: http://0.r.msn.com/?ld=7v7Pf0o6dfvcggjmXvvsEKhzVUCUxwxRmKzEhcbUqMsh2Ubu9FZw1vPvSOUQKjNaf9lLFIpVKW3sQMR6aOgbPhwm9WR843zZRpT1jbKN7YgaGETlBJG5fdKcfifIi9WSQu9hAx6A&u=www.sportsmanias.com%2Frumors
WARC-Date: 2014-08-21T04:21:14Z
WARC-Record-ID: <urn:uuid:57bce680-3841-47d7-ba63-d32529823d1b>
WARC-Refers-To: <urn:uuid:cf0f47a4-dfa3-421e-ab31-10ad1f156f5e>
Content-Type: application/json
Content-Length: 1206

{"Envelope":{"Format":"WARC","WARC-Header-Length":"536","Block-Digest":"sha1:QOCGDJGXOEQRPJC7ZSJNH66GLUOGIMOM","Actual-Content-Length":"19","WARC-Header-Metadata":{"WARC-Type":"metadata","WARC-Date":"2014-08-21T04:21:14Z","WARC-Warcinfo-ID":"<urn:uuid:cf083d66-9910-45e2-b5be-a421f9889aac>","Content-Length":"19","WARC-Record-ID":"<urn:uuid:cf0f47a4-dfa3-421e-ab31-10ad1f156f5e>","WARC-Target-URI":"http://0.r.msn.com/?ld=7v7Pf0o6dfvcggjmXvvsEKhzVUCUxwxRmKzEhcbUqMsh2Ubu9FZw1vPvSOUQKjNaf9lLFIpVKW3sQMR6aOgbPhwm9WR843zZRpT1jbKN7YgaGETlBJG5fdKcfifIi9WSQu9hAx6A&u=www.sportsmanias.com%2Frumors","WARC-Concurrent-To":"<urn:uuid:edad822f-2290-4827-a5ab-a52a60348461>","Content-Type":"application/warc-fields"},"Payload-Metadata":{"Trailing-Slop-Length":"4","WARC-Metadata-Metadata":{"Trailing-Slop-Length":"0","Metadata-Records":[{"Name":"fetchTimeMs","Value":"43"}],"Actual-Content-Length":"19"},"Actual-Content-Type":"application/metadata-fields"}},"Container":{"Compressed":true,"Gzip-Metadata":{"Footer-Length":"8","Deflate-Length":"434","Header-Length":"10","Inflated-CRC":"563332706","Inflated-Length":"559"},"Offset":"1649","Filename":"CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz"}}

WARC/1.0
WARC-Type: metadata
WARC-Target-URI: http://0pointer.de/photos/?gallery=Australia&photo=496
WARC-Date: 2014-08-21T05:52:58Z
WARC-Record-ID: <urn:uuid:5a2135e9-561a-44ef-a392-753383db6124>
WARC-Refers-To: <urn:uuid:b548acf2-3911-423c-bdbf-6f806df879c2>
Content-Type: application/json
Content-Length: 1424

{"Envelope":{"Format":"WARC","WARC-Header-Length":"372","Block-Digest":"sha1:6M4H6J5EE7LTEZNE5UJID3T77VLNXYIK","Actual-Content-Length":"285","WARC-Header-Metadata":{"WARC-Type":"request","WARC-Date":"2014-08-21T05:52:58Z","WARC-Warcinfo-ID":"<urn:uuid:cf083d66-9910-45e2-b5be-a421f9889aac>","Content-Length":"285","WARC-Record-ID":"<urn:uuid:b548acf2-3911-423c-bdbf-6f806df879c2>","WARC-Target-URI":"http://0pointer.de/photos/?gallery=Australia&photo=496","WARC-IP-Address":"85.214.72.216","Content-Type":"application/http; msgtype=request"},"Payload-Metadata":{"Trailing-Slop-Length":"4","HTTP-Request-Metadata":{"Headers":{"Accept-Language":"en-us,en-gb,en;q=0.7,*;q=0.3","Host":"0pointer.de","Accept-Encoding":"x-gzip, gzip, deflate","User-Agent":"CCBot/2.0 (http://commoncrawl.org/faq/)","Accept":"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},"Headers-Length":"283","Entity-Length":"0","Entity-Trailing-Slop-Bytes":"0","Request-Message":{"Method":"GET","Version":"HTTP/1.0","Path":"/photos/?gallery=Australia&photo=496"},"Entity-Digest":"sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"},"Actual-Content-Type":"application/http; msgtype=request"}},"Container":{"Compressed":true,"Gzip-Metadata":{"Footer-Length":"8","Deflate-Length":"437","Header-Length":"10","Inflated-CRC":"1822023262","Inflated-Length":"661"},"Offset":"2083","Filename":"CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz"}}

WARC/1.0
WARC-Type: metadata
WARC-Target-URI: http://0pointer.de/photos/?gallery=Australia&photo=496
WARC-Date: 2014-08-21T05:52:58Z
WARC-Record-ID: <urn:uuid:2d67f160-cf0f-4323-8962-bd406456a0a9>
WARC-Refers-To: <urn:uuid:d2ce4c32-7c09-477e-87c9-36e8e49ce467>
Content-Type: application/json
Content-Length: 5356

{"Envelope":{"Format":"WARC","WARC-Header-Length":"562","Block-Digest":"sha1:AYF2WX53LMGKI5AH2DGOBCMFQR7SICSS","Actual-Content-Length":"7387","WARC-Header-Metadata":{"WARC-Type":"response","WARC-Date":"2014-08-21T05:52:58Z","WARC-Warcinfo-ID":"<urn:uuid:cf083d66-9910-45e2-b5be-a421f9889aac>","Content-Length":"7387","WARC-Record-ID":"<urn:uuid:d2ce4c32-7c09-477e-87c9-36e8e49ce467>","WARC-Block-Digest":"sha1:AYF2WX53LMGKI5AH2DGOBCMFQR7SICSS","WARC-Payload-Digest":"sha1:FQGN6GPYXVZ7SHCJRPDRTHW2GP6M6KAJ","WARC-Target-URI":"http://0pointer.de/photos/?gallery=Australia&photo=496","WARC-IP-Address":"85.214.72.216","WARC-Concurrent-To":"<urn:uuid:b548acf2-3911-423c-bdbf-6f806df879c2>","Content-Type":"application/http; msgtype=response"},"Payload-Metadata":{"Trailing-Slop-Length":"4","Actual-Content-Type":"application/http; msgtype=response","HTTP-Response-Metadata":{"Headers":{"Date":"Thu, 21 Aug 2014 05:52:57 GMT","Content-Length":"7204","Content-Type":"text/html; charset=utf-8","Connection":"close","X-Powered-By":"PHP/5.3.8-1+b1","Server":"Apache"},"Headers-Length":"183","Entity-Length":"7204","Entity-Trailing-Slop-Bytes":"0","Response-Message":{"Status":"200","Version":"HTTP/1.1","Reason":"OK"},"HTML-Metadata":{"Links":[{"text":"dark","title":"dark","path":"A@/href","url":"#"},{"text":"classic","title":"classic","path":"A@/href","url":"#"},{"text":"gorilla","title":"gorilla","path":"A@/href","url":"#"},{"text":"Photo Gallery","path":"A@/href","url":"http://0pointer.de/photos/"},{"text":"Photo Gallery Index","path":"A@/href","url":"/photos/"},{"text":"Australia","path":"A@/href","url":"/photos/?gallery=Australia"},{"title":"Show Thumbnail Navigation","path":"A@/href","url":"/photos/?gallery=Australia&amp;photo=496&amp;exif_style=&amp;show_thumbs=yes"},{"alt":"496","path":"IMG@/src","url":"./galleries/Australia/lq/img-496.jpg"},{"alt":"Previous","path":"IMG@/src","url":"./galleries/Australia/thumbs/img-495.jpg"},{"text":"Previous","path":"A@/href","url":"/photos/?gallery=Australia&amp;photo=495&amp;exif_style=&amp;show_thumbs="},{"alt":"Next","path":"IMG@/src","url":"./galleries/Australia/thumbs/img-497.jpg"},{"text":"Next","path":"A@/href","url":"/photos/?gallery=Australia&amp;photo=497&amp;exif_style=&amp;show_thumbs="},{"text":"display table","path":"A@/href","url":"/photos/?galerie=Australia&amp;photo=496&amp;exif_style=descriptive&amp;show_thumbs="},{"text":"MQ","path":"A@/href","url":"./galleries/Australia/mq/img-496.jpg"},{"text":"Show FormHide Form","path":"A@/href","url":"javascript:toggle_comment()"},{"path":"FORM@/action","method":"post","url":"/photos/?gallery=Australia&amp;photo=496"},{"text":"Name:","title":"Enter your name.","path":"A@/href","url":"#"},{"text":"Remember Name:","title":"Should the browser remember your name?","path":"A@/href","url":"#"},{"text":"Retype PIN Above:","title":"Enter the number shown above.","path":"A@/href","url":"#"},{"text":"Comment:","title":"Allowed HTML tags: a,b,i,ul,li,blockquote,br.","path":"A@/href","url":"#"},{"text":"&lt; Previous","path":"A@/href","url":"/photos/?gallery=Australia&amp;photo=495&amp;exif_style=&amp;show_thumbs="},{"text":"Next &gt;","path":"A@/href","url":"/photos/?gallery=Australia&amp;photo=497&amp;exif_style=&amp;show_thumbs="},{"text":"All Panoramas","path":"A@/href","url":"/static/panoramas.cgi"},{"text":"Special Photo Series","path":"A@/href","url":"/static/index.cgi"},{"text":"Lennart's Blog","path":"A@/href","url":"http://0pointer.de/blog"},{"text":"Lennart's Homepage","path":"A@/href","url":"http://0pointer.de/lennart/"},{"text":"Lennart's Photos","path":"A@/href","url":"http://0pointer.de/photos/"},{"text":"Impressum/Imprint","path":"A@/href","url":"http://0pointer.de/imprint"},{"alt":"Creative Commons License","path":"IMG@/src","url":"http://creativecommons.org/images/public/somerights20.png"},{"path":"A@/href","url":"http://creativecommons.org/licenses/by-sa/3.0/"},{"text":"Creative Commons Attribution-ShareAlike 3.0 License","path":"A@/href","url":"http://creativecommons.org/licenses/by-sa/3.0/"}],"Head":{"Link":[{"path":"LINK@/href","rel":"icon","type":"image/png","url":"stock_camera-16.png"},{"path":"LINK@/href","rel":"shortcut icon","type":"image/x-icon","url":"favicon.ico"},{"path":"LINK@/href","rel":"Top","url":"/photos/"},{"path":"LINK@/href","rel":"First","url":"/photos/?gallery=Australia&amp;photo=1"},{"path":"LINK@/href","rel":"Previous","url":"/photos/?gallery=Australia&amp;photo=495"},{"path":"LINK@/href","rel":"Next","url":"/photos/?gallery=Australia&amp;photo=497"},{"path":"LINK@/href","rel":"Last","url":"/photos/?gallery=Australia&amp;photo=1242"},{"path":"LINK@/href","rel":"stylesheet","type":"text/css","url":"inc/styles/dark/dark.css"},{"path":"LINK@/href","rel":"alternate stylesheet","type":"text/css","url":"inc/styles/classic/classic.css"},{"path":"LINK@/href","rel":"alternate stylesheet","type":"text/css","url":"inc/styles/gorilla/gorilla.css"}],"Scripts":[{"path":"SCRIPT@/src","type":"text/javascript","url":"inc/global.js"}],"Title":"Photos"}},"Entity-Digest":"sha1:FQGN6GPYXVZ7SHCJRPDRTHW2GP6M6KAJ"}}},"Container":{"Compressed":true,"Gzip-Metadata":{"Footer-Length":"8","Deflate-Length":"2828","Header-Length":"10","Inflated-CRC":"-274687686","Inflated-Length":"7953"},"Offset":"2520","Filename":"CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz"}}

WARC/1.0
WARC-Type: metadata
WARC-Target-URI: http://0pointer.de/photos/?gallery=Australia&photo=496
WARC-Date: 2014-08-21T05:52:58Z
WARC-Record-ID: <urn:uuid:69445ed9-4c78-4733-8fc2-318efe19e0a3>
WARC-Refers-To: <urn:uuid:c2c1c85f-8993-4c8b-8a58-8d7c03e9e4f8>
Content-Type: application/json
Content-Length: 1071

{"Envelope":{"Format":"WARC","WARC-Header-Length":"399","Block-Digest":"sha1:UKOGIISFNHG3LXY37OW4VTRT63NIYPOD","Actual-Content-Length":"20","WARC-Header-Metadata":{"WARC-Type":"metadata","WARC-Date":"2014-08-21T05:52:58Z","WARC-Warcinfo-ID":"<urn:uuid:cf083d66-9910-45e2-b5be-a421f9889aac>","Content-Length":"20","WARC-Record-ID":"<urn:uuid:c2c1c85f-8993-4c8b-8a58-8d7c03e9e4f8>","WARC-Target-URI":"http://0pointer.de/photos/?gallery=Australia&photo=496","WARC-Concurrent-To":"<urn:uuid:d2ce4c32-7c09-477e-87c9-36e8e49ce467>","Content-Type":"application/warc-fields"},"Payload-Metadata":{"Trailing-Slop-Length":"4","WARC-Metadata-Metadata":{"Trailing-Slop-Length":"0","Metadata-Records":[{"Name":"fetchTimeMs","Value":"980"}],"Actual-Content-Length":"20"},"Actual-Content-Type":"application/metadata-fields"}},"Container":{"Compressed":true,"Gzip-Metadata":{"Footer-Length":"8","Deflate-Length":"310","Header-Length":"10","Inflated-CRC":"1018636576","Inflated-Length":"423"},"Offset":"5348","Filename":"CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz"}}

WARC/1.0
WARC-Type: metadata
WARC-Target-URI: http://0pointer.de/photos/?gallery=Thailand%202011-01&photo=726&show_thumbs=yes&exif_style=
WARC-Date: 2014-08-21T06:06:05Z
WARC-Record-ID: <urn:uuid:cc1a8251-e6b6-4d91-b140-7e83d2e6e225>
WARC-Refers-To: <urn:uuid:72ac2c16-735e-4499-9872-fe81b3f56ec3>
Content-Type: application/json
Content-Length: 1498

{"Envelope":{"Format":"WARC","WARC-Header-Length":"409","Block-Digest":"sha1:XLWBHSGXSYUVQL2L5MVTSXRCUT5MEUVY","Actual-Content-Length":"322","WARC-Header-Metadata":{"WARC-Type":"request","WARC-Date":"2014-08-21T06:06:05Z","WARC-Warcinfo-ID":"<urn:uuid:cf083d66-9910-45e2-b5be-a421f9889aac>","Content-Length":"322","WARC-Record-ID":"<urn:uuid:72ac2c16-735e-4499-9872-fe81b3f56ec3>","WARC-Target-URI":"http://0pointer.de/photos/?gallery=Thailand%202011-01&photo=726&show_thumbs=yes&exif_style=","WARC-IP-Address":"85.214.72.216","Content-Type":"application/http; msgtype=request"},"Payload-Metadata":{"Trailing-Slop-Length":"4","HTTP-Request-Metadata":{"Headers":{"Accept-Language":"en-us,en-gb,en;q=0.7,*;q=0.3","Host":"0pointer.de","Accept-Encoding":"x-gzip, gzip, deflate","User-Agent":"CCBot/2.0 (http://commoncrawl.org/faq/)","Accept":"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},"Headers-Length":"320","Entity-Length":"0","Entity-Trailing-Slop-Bytes":"0","Request-Message":{"Method":"GET","Version":"HTTP/1.0","Path":"/photos/?gallery=Thailand%202011-01&photo=726&show_thumbs=yes&exif_style="},"Entity-Digest":"sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"},"Actual-Content-Type":"application/http; msgtype=request"}},"Container":{"Compressed":true,"Gzip-Metadata":{"Footer-Length":"8","Deflate-Length":"465","Header-Length":"10","Inflated-CRC":"1464693846","Inflated-Length":"735"},"Offset":"5658","Filename":"CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc.gz"}}

